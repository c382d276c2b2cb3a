// Package databases as images hold them, turned into an inventory: dpkg's `status` (and the
// one-file-per-package `status.d/` of distroless images), apk's `installed` and rpm's sqlite
// database (rpmdb.ts). Parsers take the bytes read from the image; they never throw on what they
// are given: a damaged database yields what could be read and a warning.
import { MAX_RELEASE_FILE, osFromReleaseFiles, type OsInfo } from "./os_release.ts";
import { parseRpmBdb, parseRpmSqlite } from "./rpmdb.ts";
import type { DbLimits, LimitedResult, Package, ParseOptions } from "./package_types.ts";

// The types live apart so rpmdb.ts can use them without importing this file back.
export type {
  DbLimits,
  LimitedResult,
  Package,
  ParseOptions,
  ParseResult,
} from "./package_types.ts";

/** An image with more is not a real image; the rest is reported as a warning. */
export const MAX_PACKAGES = 100_000;
/** Longer than any real package name, version or architecture. */
export const MAX_FIELD_BYTES = 4096;

/** Paths (no leading `/`) a scan reads from the merged filesystem. */
export const PACKAGE_DB_PATHS = [
  "etc/os-release",
  "usr/lib/os-release",
  "etc/debian_version",
  "etc/alpine-release",
  "etc/redhat-release",
  "etc/centos-release",
  "etc/fedora-release",
  "etc/rocky-release",
  "etc/almalinux-release",
  "var/lib/dpkg/status",
  "lib/apk/db/installed",
  "var/lib/rpm/rpmdb.sqlite",
  "usr/lib/sysimage/rpm/rpmdb.sqlite",
  "var/lib/rpm/Packages",
  "var/lib/rpm/Packages.db",
];
export const STATUS_D_PREFIX = "var/lib/dpkg/status.d/";

const NL = 0x0a, CR = 0x0d, SP = 0x20, TAB = 0x09, COLON = 0x3a;
/** Longer than any field name a parser keeps ("architecture"); a longer one is not looked at. */
const MAX_KEY = 32;
/** Warnings kept per inventory: a hostile image can make one per status.d file. */
export const MAX_WARNINGS = 100;

const utf8 = new TextDecoder();

/** End of the line starting at `pos` (the LF's index, or `n`): short lines are the common case. */
function lineEnd(b: Uint8Array, pos: number, n: number): number {
  const stop = Math.min(n, pos + 64);
  for (let i = pos; i < stop; i++) if (b[i] === NL) return i;
  if (stop === n) return n;
  const i = b.indexOf(NL, stop);
  return i < 0 ? n : i;
}

interface Rec {
  fields: Map<string, string>;
  /** a kept field was longer than maxFieldBytes (and not kept) */
  tooLong: boolean;
}

/**
 * Records of an RFC 822-style file (dpkg: `Field: value`, blank-line separated, continuation
 * lines indented) or of apk's `installed` (`X:value`, empty-line separated), read from bytes:
 * only the `keep` fields are decoded, each up to `maxField` bytes, so neither a huge file nor a
 * huge line builds a string larger than that. dpkg keeps a field's last value, apk its first.
 */
function* records(
  b: Uint8Array,
  style: "dpkg" | "apk",
  keep: ReadonlySet<string>,
  maxField: number,
): Generator<Rec> {
  const n = b.length;
  let fields = new Map<string, string>();
  let any = false;
  let tooLong = false;
  let pos = 0;
  while (pos < n) {
    const start = pos;
    let end = lineEnd(b, pos, n);
    const next = end + 1;
    if (end > pos && b[end - 1] === CR) end--;
    let first = pos;
    if (style === "dpkg") { while (first < end && (b[first] === SP || b[first] === TAB)) first++; }
    if (first === end) {
      // a separator: a whole run of them is skipped here (a hostile file can be nothing else)
      if (any) {
        yield { fields, tooLong };
        fields = new Map();
      }
      any = tooLong = false;
      pos = next;
      while (pos < n && (b[pos] === NL || (b[pos] === CR && b[pos + 1] === NL))) {
        pos += b[pos] === NL ? 1 : 2;
      }
      continue;
    }
    pos = next;
    let kEnd: number, vStart: number, key: string;
    if (style === "apk") {
      if (end - first < 2 || b[first + 1] !== COLON) continue;
      any = true;
      key = String.fromCharCode(b[first]);
      if (!keep.has(key) || fields.has(key)) continue;
      kEnd = first + 1;
      vStart = first + 2;
    } else {
      // dpkg: a continuation line only extends fields not kept here (Description, Conffiles…)
      if (first > start) continue;
      const stop = Math.min(end, first + MAX_KEY + 1);
      let colon = first;
      while (colon < stop && b[colon] !== COLON) colon++;
      if (colon === stop || colon === first) continue;
      any = true;
      kEnd = colon;
      while (kEnd > first && (b[kEnd - 1] === SP || b[kEnd - 1] === TAB)) kEnd--;
      key = "";
      for (let i = first; i < kEnd; i++) {
        const c = b[i];
        key += String.fromCharCode(c >= 0x41 && c <= 0x5a ? c + 32 : c);
      }
      if (!keep.has(key)) continue;
      vStart = colon + 1;
    }
    let vEnd = end;
    if (style === "dpkg") {
      while (vStart < vEnd && (b[vStart] === SP || b[vStart] === TAB)) vStart++;
      while (vEnd > vStart && (b[vEnd - 1] === SP || b[vEnd - 1] === TAB)) vEnd--;
    }
    if (vEnd - vStart > maxField) {
      tooLong = true;
      continue;
    }
    fields.set(key, utf8.decode(b.subarray(vStart, vEnd)));
  }
  if (any) yield { fields, tooLong };
}

const DPKG_KEYS = new Set(["package", "version", "status", "source", "architecture"]);
const APK_KEYS = new Set(["P", "V", "A", "o"]);

function dpkgPackage(s: Map<string, string>, location: string): Package | null {
  const name = s.get("package");
  const version = s.get("version");
  if (!name || !version) return null;
  const p: Package = { name, version, type: "deb", location };
  const arch = s.get("architecture");
  if (arch) p.arch = arch;
  // `Source: name` or `Source: name (version)` when the binary's version differs (binNMUs).
  const src = s.get("source");
  const m = src ? /^(\S+)(?:\s+\((\S+)\))?$/.exec(src) : null;
  p.source_name = m ? m[1] : name;
  p.source_version = m?.[2] ?? version;
  return p;
}

const bytesOf = (input: string | Uint8Array) =>
  typeof input === "string" ? new TextEncoder().encode(input) : input;

function limitWarning(location: string, opts: ParseOptions, max: number): string {
  const limit = opts.packageLimit ?? max;
  return `${location}: more than ${limit} packages${
    limit !== max ? " in the image" : ""
  }, the rest not listed`;
}

/**
 * dpkg's `status` (or one `status.d/` file, whose entries carry no Status: requireInstalled
 * false). Bytes are read line by line; a string is accepted for callers that have one.
 */
export function parseDpkgStatus(
  input: string | Uint8Array,
  location: string,
  requireInstalled = true,
  opts: ParseOptions = {},
): LimitedResult {
  const max = opts.maxPackages ?? MAX_PACKAGES;
  const maxField = opts.maxFieldBytes ?? MAX_FIELD_BYTES;
  const packages: Package[] = [];
  const warnings: string[] = [];
  let skipped = 0, long = 0;
  let truncated = false;
  for (const r of records(bytesOf(input), "dpkg", DPKG_KEYS, maxField)) {
    if (r.tooLong) {
      long++;
      continue;
    }
    const s = r.fields;
    // `Status: want flag state`: only installed packages are in the image.
    const status = s.get("status");
    if (requireInstalled && !(status && /\sinstalled$/.test(status))) continue;
    const p = dpkgPackage(s, location);
    if (!p) {
      skipped++;
      continue;
    }
    if (packages.length >= max) {
      truncated = true;
      warnings.push(limitWarning(location, opts, max));
      break;
    }
    packages.push(p);
  }
  if (skipped) warnings.push(`${location}: ${skipped} entries without a Package or Version`);
  if (long) {
    warnings.push(`${location}: ${long} entries with a field over ${maxField} bytes skipped`);
  }
  return { packages, warnings, truncated };
}

/** apk's `installed`: blank-line separated records of `X:value` lines. */
export function parseApkInstalled(
  input: string | Uint8Array,
  location: string,
  opts: ParseOptions = {},
): LimitedResult {
  const max = opts.maxPackages ?? MAX_PACKAGES;
  const maxField = opts.maxFieldBytes ?? MAX_FIELD_BYTES;
  const packages: Package[] = [];
  const warnings: string[] = [];
  let skipped = 0, long = 0;
  let truncated = false;
  for (const r of records(bytesOf(input), "apk", APK_KEYS, maxField)) {
    if (r.tooLong) {
      long++;
      continue;
    }
    const rec = r.fields;
    const name = rec.get("P"), version = rec.get("V");
    if (!name || !version) {
      skipped++;
      continue;
    }
    if (packages.length >= max) {
      truncated = true;
      warnings.push(limitWarning(location, opts, max));
      break;
    }
    const p: Package = { name, version, type: "apk", location };
    const arch = rec.get("A");
    if (arch) p.arch = arch;
    p.source_name = rec.get("o") || name;
    p.source_version = version;
    packages.push(p);
  }
  if (skipped) warnings.push(`${location}: ${skipped} records without P: or V:`);
  if (long) {
    warnings.push(`${location}: ${long} records with a field over ${maxField} bytes skipped`);
  }
  return { packages, warnings, truncated };
}

export interface Inventory {
  os: OsInfo | null;
  packages: Package[];
  warnings: string[];
}

/** The release files among PACKAGE_DB_PATHS: read as text, a bounded head of each. */
const RELEASE_FILES = PACKAGE_DB_PATHS.filter((p) =>
  p.startsWith("etc/") || p.endsWith("os-release")
);

/**
 * The inventory of an image from the files of PACKAGE_DB_PATHS (and status.d/) it holds. The
 * package limit holds over all databases together; later databases get what is left.
 */
export function inventory(files: Map<string, Uint8Array>, opts: DbLimits = {}): Inventory {
  const maxPackages = opts.maxPackages ?? MAX_PACKAGES;
  const headBytes = opts.maxReleaseFileBytes ?? MAX_RELEASE_FILE;
  const packages: Package[] = [];
  const warnings: string[] = [];
  const release = new Map<string, string>();
  for (const p of RELEASE_FILES) {
    const b = files.get(p);
    if (!b) continue;
    release.set(p, utf8.decode(b.subarray(0, headBytes)));
    if (b.length > headBytes) warnings.push(`${p}: ${b.length} bytes, the first ${headBytes} read`);
  }
  const os = osFromReleaseFiles(release, opts);
  let notRead = 0;
  const run = (parse: (o: ParseOptions) => LimitedResult) => {
    const left = maxPackages - packages.length;
    if (left <= 0) {
      notRead++;
      return;
    }
    const r = parse({ ...opts, maxPackages: left, packageLimit: maxPackages });
    for (const p of r.packages) packages.push(p);
    for (const w of r.warnings) warnings.push(w);
  };
  const status = files.get("var/lib/dpkg/status");
  if (status) {
    run((o) => parseDpkgStatus(status, "var/lib/dpkg/status", true, o));
  }
  const statusD = [...files.keys()].filter((p) => p.startsWith(STATUS_D_PREFIX)).sort();
  for (const p of statusD) run((o) => parseDpkgStatus(files.get(p)!, p, false, o));
  const apk = files.get("lib/apk/db/installed");
  if (apk) run((o) => parseApkInstalled(apk, "lib/apk/db/installed", o));
  let rpmDone = false;
  for (const p of ["var/lib/rpm/rpmdb.sqlite", "usr/lib/sysimage/rpm/rpmdb.sqlite"]) {
    const b = files.get(p);
    if (!b || rpmDone) continue;
    run((o) => parseRpmSqlite(b, p, o));
    rpmDone = true;
  }
  const bdb = files.get("var/lib/rpm/Packages");
  if (bdb && !rpmDone) {
    run((o) => parseRpmBdb(bdb, "var/lib/rpm/Packages", o));
    rpmDone = true;
  }
  if (files.has("var/lib/rpm/Packages.db") && !rpmDone) {
    warnings.push("var/lib/rpm/Packages.db: the NDB rpm database format (SUSE) is not read");
  }
  if (notRead) {
    warnings.push(
      `${notRead} package database(s) not read: over the limit of ${maxPackages} packages`,
    );
  }
  if (warnings.length > MAX_WARNINGS) {
    const more = warnings.length - (MAX_WARNINGS - 1);
    warnings.length = MAX_WARNINGS - 1;
    warnings.push(`${more} more warnings`);
  }
  return { os, packages, warnings };
}
