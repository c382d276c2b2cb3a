// Package databases as images hold them, turned into an inventory: dpkg's `status` (and the
// one-file-per-package `status.d/` of distroless images), apk's `installed` and rpm's sqlite
// database (rpmdb.ts). Parsers take the bytes read from the image; they never throw on what they
// are given: a damaged database yields what could be read and a warning.
import { osFromReleaseFiles, type OsInfo } from "./os_release.ts";
import { parseRpmBdb, parseRpmSqlite } from "./rpmdb.ts";

export interface Package {
  name: string;
  version: string;
  source_name?: string;
  source_version?: string;
  arch?: string;
  type: "deb" | "apk" | "rpm" | "npm" | "pypi";
  /** the database file it came from */
  location: string;
}

export interface ParseResult {
  packages: Package[];
  warnings: string[];
}

/** An image with more is not a real image; the rest is reported as a warning. */
export const MAX_PACKAGES = 100_000;
const MAX_FIELD = 4096;

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

/** RFC 822-style stanzas: `Field: value`, continuation lines start with a space. */
function* stanzas(text: string): Generator<Map<string, string>> {
  let cur = new Map<string, string>();
  let last: string | null = null;
  for (const raw of text.split("\n")) {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (line.trim() === "") {
      if (cur.size) yield cur;
      cur = new Map();
      last = null;
      continue;
    }
    if ((line[0] === " " || line[0] === "\t") && last) {
      const prev = cur.get(last)!;
      if (prev.length < MAX_FIELD) cur.set(last, `${prev}\n${line.trim()}`.slice(0, MAX_FIELD));
      continue;
    }
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    last = line.slice(0, colon).trim().toLowerCase();
    cur.set(last, line.slice(colon + 1).trim().slice(0, MAX_FIELD));
  }
  if (cur.size) yield cur;
}

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

export function parseDpkgStatus(
  text: string,
  location: string,
  requireInstalled = true,
): ParseResult {
  const packages: Package[] = [];
  const warnings: string[] = [];
  let skipped = 0;
  for (const s of stanzas(text)) {
    // `Status: want flag state`: only installed packages are in the image.
    const status = s.get("status");
    if (requireInstalled && !(status && /\sinstalled$/.test(status))) continue;
    const p = dpkgPackage(s, location);
    if (!p) {
      skipped++;
      continue;
    }
    if (packages.length >= MAX_PACKAGES) {
      warnings.push(`${location}: more than ${MAX_PACKAGES} packages, the rest not listed`);
      break;
    }
    packages.push(p);
  }
  if (skipped) warnings.push(`${location}: ${skipped} entries without a Package or Version`);
  return { packages, warnings };
}

/** apk's `installed`: blank-line separated records of `X:value` lines. */
export function parseApkInstalled(text: string, location: string): ParseResult {
  const packages: Package[] = [];
  const warnings: string[] = [];
  let skipped = 0;
  const flush = (rec: Map<string, string>) => {
    if (!rec.size) return;
    const name = rec.get("P"), version = rec.get("V");
    if (!name || !version) {
      skipped++;
      return;
    }
    if (packages.length >= MAX_PACKAGES) return;
    const p: Package = { name, version, type: "apk", location };
    const arch = rec.get("A");
    if (arch) p.arch = arch;
    p.source_name = rec.get("o") || name;
    p.source_version = version;
    packages.push(p);
  };
  let rec = new Map<string, string>();
  for (const raw of text.split("\n")) {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (line === "") {
      flush(rec);
      rec = new Map();
      continue;
    }
    if (line[1] !== ":") continue;
    const k = line[0];
    // Only the first of a key counts (file entries repeat R:, Z:…; P/V/A/o appear once).
    if (!rec.has(k)) rec.set(k, line.slice(2, 2 + MAX_FIELD));
  }
  flush(rec);
  if (packages.length >= MAX_PACKAGES) {
    warnings.push(`${location}: more than ${MAX_PACKAGES} packages, the rest not listed`);
  }
  if (skipped) warnings.push(`${location}: ${skipped} records without P: or V:`);
  return { packages, warnings };
}

export interface Inventory {
  os: OsInfo | null;
  packages: Package[];
  warnings: string[];
}

const dec = new TextDecoder();

/** The inventory of an image from the files of PACKAGE_DB_PATHS (and status.d/) it holds. */
export function inventory(files: Map<string, Uint8Array>): Inventory {
  const text = new Map<string, string>();
  for (const [p, b] of files) {
    if (!p.endsWith(".sqlite") && !p.endsWith("Packages") && !p.endsWith("Packages.db")) {
      text.set(p, dec.decode(b));
    }
  }
  const os = osFromReleaseFiles(text);
  const packages: Package[] = [];
  const warnings: string[] = [];
  const add = (r: ParseResult) => {
    packages.push(...r.packages.slice(0, MAX_PACKAGES - packages.length));
    warnings.push(...r.warnings);
  };
  const status = text.get("var/lib/dpkg/status");
  if (status !== undefined) add(parseDpkgStatus(status, "var/lib/dpkg/status"));
  for (const [p, t] of [...text].sort(([a], [b]) => (a < b ? -1 : 1))) {
    if (p.startsWith(STATUS_D_PREFIX)) add(parseDpkgStatus(t, p, false));
  }
  const apk = text.get("lib/apk/db/installed");
  if (apk !== undefined) add(parseApkInstalled(apk, "lib/apk/db/installed"));
  let rpmDone = false;
  for (const p of ["var/lib/rpm/rpmdb.sqlite", "usr/lib/sysimage/rpm/rpmdb.sqlite"]) {
    const b = files.get(p);
    if (!b || rpmDone) continue;
    add(parseRpmSqlite(b, p));
    rpmDone = true;
  }
  const bdb = files.get("var/lib/rpm/Packages");
  if (bdb && !rpmDone) {
    add(parseRpmBdb(bdb, "var/lib/rpm/Packages"));
    rpmDone = true;
  }
  if (files.has("var/lib/rpm/Packages.db") && !rpmDone) {
    warnings.push("var/lib/rpm/Packages.db: the NDB rpm database format (SUSE) is not read");
  }
  return { os, packages, warnings };
}
