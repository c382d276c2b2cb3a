// Language packages, where they come cheap: both need no read of the package's own files.
// - Python: every installed distribution leaves a `<name>-<version>.dist-info` (wheel) or
//   `.egg-info` directory in `site-packages`/`dist-packages`; its name carries both.
// - npm: npm ≥ 7 records the installed tree of a `node_modules` in its hidden lockfile
//   `node_modules/.package-lock.json`; a project without one is read from its
//   `package-lock.json` (lockfile v1's nested `dependencies`, v2/v3's `packages`).
// Packages npm installs globally without a lockfile and Go binaries' build info are not read.
import type { LimitedResult, Package } from "./package_types.ts";

/** Packages listed from one lockfile, or from the Python metadata of one image. */
export const MAX_LANGUAGE_PACKAGES = 20_000;
/** A lockfile larger than this is skipped (large monorepos' lockfiles are a few MiB). */
export const MAX_LOCKFILE_BYTES = 32 << 20;
/** Lockfile entries looked at, packages or not: bounds the walk of whatever the JSON holds. */
export const MAX_LOCKFILE_ENTRIES = 1_000_000;
/** Characters of a package name or version (npm caps names at 214). */
export const MAX_NAME_CHARS = 256;
/** Characters of a lockfile key (a path under the project); a longer one is not a package. */
const MAX_KEY_CHARS = 4096;
const MAX_DEPTH = 100;

export interface LanguageLimits {
  /** packages listed per call (one lockfile, or the Python metadata of an image) */
  maxPackages?: number;
  /** bytes (or characters, given a string) of a lockfile parsed */
  maxLockfileBytes?: number;
  /** lockfile entries looked at */
  maxLockfileEntries?: number;
  /** characters of a name or version */
  maxNameChars?: number;
}
/** Lockfiles read per image: a tree of a few apps, not every vendored fixture in it. */
export const MAX_LOCKFILES = 64;

const PY_META = /^(.+)-([^-]+)\.(dist-info|egg-info)$/;
const PY_DIRS = new Set(["site-packages", "dist-packages"]);

/** PEP 503 normalisation: OSV's PyPI records use the index's normalised project names. */
export function normalizePypiName(name: string): string {
  return name.toLowerCase().replace(/[-_.]+/g, "-");
}

/**
 * Python distributions from the paths of a merged filesystem: the metadata directories
 * directly under a `site-packages` or `dist-packages` directory.
 */
export function pythonPackages(paths: Iterable<string>, opts: LanguageLimits = {}): LimitedResult {
  const max = opts.maxPackages ?? MAX_LANGUAGE_PACKAGES;
  const maxName = opts.maxNameChars ?? MAX_NAME_CHARS;
  const seen = new Map<string, Package>();
  let truncated = false;
  for (const path of paths) {
    // most paths name neither directory: found by one search, never split
    for (let at = path.indexOf("-packages/"); at >= 0; at = path.indexOf("-packages/", at + 1)) {
      const dirStart = at - 4;
      if (dirStart < 0 || !PY_DIRS.has(path.slice(dirStart, at + 9))) continue;
      if (dirStart > 0 && path[dirStart - 1] !== "/") continue;
      const start = at + 10;
      const slash = path.indexOf("/", start);
      const seg = path.slice(start, slash < 0 ? path.length : slash);
      if (seg.length > 2 * maxName + 20 || !/\.(?:dist|egg)-info$/.test(seg)) continue;
      const m = PY_META.exec(seg);
      if (!m || m[1].length > maxName || m[2].length > maxName) continue;
      const dir = path.slice(0, start + seg.length);
      if (!seen.has(dir)) {
        if (seen.size >= max) truncated = true;
        // Wheel metadata directories escape `-` in names as `_`; the version never holds `-`.
        else seen.set(dir, { name: m[1], version: m[2], type: "pypi", location: dir });
      }
      break;
    }
    if (truncated) break;
  }
  const warnings = truncated ? [`more than ${max} Python distributions, the rest not listed`] : [];
  return { packages: [...seen.values()], warnings, truncated };
}

/** Which lockfile speaks for each project: the hidden lockfile where npm wrote one. */
export function npmLockfiles(paths: Iterable<string>): string[] {
  const hidden = new Set<string>();
  const plain: string[] = [];
  for (const p of paths) {
    if (p === "node_modules/.package-lock.json" || p.endsWith("/node_modules/.package-lock.json")) {
      hidden.add(p);
    } else if (
      (p === "package-lock.json" || p.endsWith("/package-lock.json")) &&
      !p.includes("node_modules/")
    ) plain.push(p);
  }
  const out = [...hidden];
  for (const p of plain) {
    const dir = p.slice(0, -"package-lock.json".length);
    if (!hidden.has(`${dir}node_modules/.package-lock.json`)) out.push(p);
  }
  return out.sort();
}

/** The package name a lockfile v2/v3 key stands for: what follows its last `node_modules/`. */
function nameFromKey(key: string): string | null {
  const at = key.lastIndexOf("node_modules/");
  if (at < 0) return null;
  const name = key.slice(at + "node_modules/".length);
  return /^(@[^/]+\/)?[^/@][^/]*$/.test(name) ? name : null;
}

/**
 * Packages of an npm lockfile (the bytes, or their text). A file over maxLockfileBytes is not
 * parsed; the walk of what it holds stops after maxLockfileEntries entries or maxPackages
 * packages, each with a warning.
 */
export function parseNpmLock(
  input: string | Uint8Array,
  location: string,
  opts: LanguageLimits = {},
): LimitedResult {
  const max = opts.maxPackages ?? MAX_LANGUAGE_PACKAGES;
  const maxBytes = opts.maxLockfileBytes ?? MAX_LOCKFILE_BYTES;
  const maxEntries = opts.maxLockfileEntries ?? MAX_LOCKFILE_ENTRIES;
  const maxName = opts.maxNameChars ?? MAX_NAME_CHARS;
  if (input.length > maxBytes) {
    return {
      packages: [],
      warnings: [
        `${location}: ${input.length} bytes, over the lockfile limit of ${maxBytes}: not read`,
      ],
    };
  }
  let doc: unknown;
  try {
    doc = JSON.parse(typeof input === "string" ? input : new TextDecoder().decode(input));
  } catch {
    return { packages: [], warnings: [`${location}: not JSON`] };
  }
  if (!doc || typeof doc !== "object") {
    return { packages: [], warnings: [`${location}: not a lockfile`] };
  }
  // The project directory: lockfile keys (`node_modules/x`) are relative to it.
  const base = location.endsWith("node_modules/.package-lock.json")
    ? location.slice(0, -"node_modules/.package-lock.json".length)
    : location.slice(0, location.lastIndexOf("/") + 1);
  const out = new Map<string, Package>();
  const warnings: string[] = [];
  let entries = 0;
  let truncated = false;
  /** false once a limit is reached: the walk stops */
  const visit = () => {
    if (out.size >= max) truncated = true;
    return !truncated && ++entries <= maxEntries;
  };
  const add = (name: string, version: unknown, key: string) => {
    if (typeof version !== "string" || version.length === 0 || version.length > maxName) return;
    if (name.length > maxName || key.length > MAX_KEY_CHARS) return;
    const loc = `${base}${key}`;
    if (!out.has(loc)) out.set(loc, { name, version, type: "npm", location: loc });
  };
  const d = doc as { packages?: unknown; dependencies?: unknown };
  if (d.packages && typeof d.packages === "object") {
    // for…in, not Object.entries: no array of every entry is built
    const pkgs = d.packages as Record<string, unknown>;
    for (const key in pkgs) {
      if (!visit()) break;
      const v = pkgs[key];
      if (!v || typeof v !== "object" || key.length > MAX_KEY_CHARS) continue;
      const e = v as { version?: unknown; link?: unknown; name?: unknown };
      if (e.link === true) continue; // a symlink to a workspace package, listed where it lives
      const name = nameFromKey(key);
      if (name) add(typeof e.name === "string" ? e.name : name, e.version, key);
    }
  } else if (d.dependencies && typeof d.dependencies === "object") {
    // v1: nested `dependencies`, walked without recursion (a hostile file can nest deeply)
    const stack: Array<[Record<string, unknown>, string, number]> = [[
      d.dependencies as Record<string, unknown>,
      "node_modules/",
      1,
    ]];
    let tooDeep = false;
    walk: while (stack.length > 0) {
      const [deps, prefix, depth] = stack.pop()!;
      for (const name in deps) {
        if (!visit()) break walk;
        const v = deps[name];
        if (!v || typeof v !== "object" || name.length > maxName) continue;
        const e = v as { version?: unknown; dependencies?: unknown };
        add(name, e.version, `${prefix}${name}`);
        if (!e.dependencies || typeof e.dependencies !== "object") continue;
        // Paths this deep exceed any filesystem's limit: a real tree never nests so far.
        if (depth >= MAX_DEPTH) tooDeep = true;
        else {
          stack.push([
            e.dependencies as Record<string, unknown>,
            `${prefix}${name}/node_modules/`,
            depth + 1,
          ]);
        }
      }
    }
    if (tooDeep) {
      warnings.push(`${location}: dependencies nested past ${MAX_DEPTH} levels not read`);
    }
  } else return { packages: [], warnings: [`${location}: no packages listed`] };
  if (truncated) warnings.push(`${location}: more than ${max} packages, the rest not listed`);
  else if (entries > maxEntries) {
    warnings.push(`${location}: more than ${maxEntries} entries, the rest not read`);
  }
  return { packages: [...out.values()], warnings, truncated };
}
