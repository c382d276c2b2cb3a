// Language packages, where they come cheap: both need no read of the package's own files.
// - Python: every installed distribution leaves a `<name>-<version>.dist-info` (wheel) or
//   `.egg-info` directory in `site-packages`/`dist-packages`; its name carries both.
// - npm: npm ≥ 7 records the installed tree of a `node_modules` in its hidden lockfile
//   `node_modules/.package-lock.json`; a project without one is read from its
//   `package-lock.json` (lockfile v1's nested `dependencies`, v2/v3's `packages`).
// Packages npm installs globally without a lockfile and Go binaries' build info are not read.
import type { Package, ParseResult } from "./package_dbs.ts";

const MAX_PACKAGES = 20_000;
const MAX_DEPTH = 100;
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
export function pythonPackages(paths: Iterable<string>): ParseResult {
  const seen = new Map<string, Package>();
  for (const path of paths) {
    const parts = path.split("/");
    for (let i = 1; i < parts.length; i++) {
      if (!PY_DIRS.has(parts[i - 1])) continue;
      const m = PY_META.exec(parts[i]);
      if (!m) continue;
      const dir = parts.slice(0, i + 1).join("/");
      if (!seen.has(dir) && seen.size < MAX_PACKAGES) {
        // Wheel metadata directories escape `-` in names as `_`; the version never holds `-`.
        seen.set(dir, { name: m[1], version: m[2], type: "pypi", location: dir });
      }
      break;
    }
  }
  return { packages: [...seen.values()], warnings: [] };
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

export function parseNpmLock(text: string, location: string): ParseResult {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
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
  const add = (name: string, version: unknown, key: string) => {
    if (typeof version !== "string" || version.length === 0 || version.length > 256) return;
    if (out.size >= MAX_PACKAGES) return;
    const loc = `${base}${key}`;
    if (!out.has(loc)) out.set(loc, { name, version, type: "npm", location: loc });
  };
  const d = doc as { packages?: unknown; dependencies?: unknown };
  if (d.packages && typeof d.packages === "object") {
    for (const [key, v] of Object.entries(d.packages as Record<string, unknown>)) {
      if (!v || typeof v !== "object") continue;
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
    while (stack.length > 0 && out.size < MAX_PACKAGES) {
      const [deps, prefix, depth] = stack.pop()!;
      for (const [name, v] of Object.entries(deps)) {
        if (!v || typeof v !== "object") continue;
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
  return { packages: [...out.values()], warnings };
}
