// rpm's package database as rpm >= 4.16 writes it (`rpmdb.sqlite`: RHEL/Rocky/Alma 9, Fedora 33+):
// a `Packages` table of header blobs, read with node:sqlite (built into Deno) from a temporary
// copy, each header parsed here. A header is an index of (tag, type, offset, count) entries over
// a data store; every offset and count is checked against the blob, so a corrupt header is
// skipped with a warning.
import { DatabaseSync } from "node:sqlite";
import type { Package, ParseResult } from "./package_dbs.ts";
import { bdbHashValues } from "./rpm_bdb.ts";

const TAG = { NAME: 1000, VERSION: 1001, RELEASE: 1002, EPOCH: 1003, ARCH: 1022, SOURCERPM: 1044 };
const TYPE_INT32 = 4, TYPE_STRING = 6, TYPE_STRING_ARRAY = 8, TYPE_I18NSTRING = 9;
const MAX_INDEX = 100_000;
const MAX_ROWS = 100_000;

export interface RpmHeader {
  name: string;
  version: string;
  release: string;
  epoch: number | null;
  arch: string | null;
  sourcerpm: string | null;
}

export class RpmHeaderError extends Error {}

/** The fields of one header blob (`il`, `dl`, `il` index entries, then `dl` bytes of data). */
export function parseRpmHeaderBlob(b: Uint8Array): RpmHeader {
  if (b.length < 8) throw new RpmHeaderError("header shorter than its counts");
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const il = v.getUint32(0), dl = v.getUint32(4);
  if (il > MAX_INDEX || 8 + il * 16 + dl > b.length) {
    throw new RpmHeaderError(`header claims ${il} entries and ${dl} data bytes in ${b.length}`);
  }
  const data = 8 + il * 16;
  const strings = new Map<number, string>();
  const ints = new Map<number, number>();
  const dec = new TextDecoder();
  for (let i = 0; i < il; i++) {
    const e = 8 + i * 16;
    const tag = v.getUint32(e), type = v.getUint32(e + 4), off = v.getUint32(e + 8);
    const count = v.getUint32(e + 12);
    if (off >= dl) continue;
    if (type === TYPE_STRING || type === TYPE_STRING_ARRAY || type === TYPE_I18NSTRING) {
      const start = data + off;
      const end = b.indexOf(0, start);
      if (end < 0 || end > data + dl) throw new RpmHeaderError(`tag ${tag}: unterminated string`);
      if (!strings.has(tag)) strings.set(tag, dec.decode(b.subarray(start, end)));
    } else if (type === TYPE_INT32 && count >= 1) {
      if (off % 4 !== 0 || off + 4 > dl) throw new RpmHeaderError(`tag ${tag}: bad int32 offset`);
      ints.set(tag, v.getInt32(data + off));
    }
  }
  const name = strings.get(TAG.NAME), version = strings.get(TAG.VERSION);
  const release = strings.get(TAG.RELEASE);
  if (!name || !version || release === undefined) {
    throw new RpmHeaderError("header without name, version or release");
  }
  return {
    name,
    version,
    release,
    epoch: ints.get(TAG.EPOCH) ?? null,
    arch: strings.get(TAG.ARCH) ?? null,
    sourcerpm: strings.get(TAG.SOURCERPM) ?? null,
  };
}

/** `name-version-release.src.rpm` → name (version and release hold no `-`). */
export function sourceName(srpm: string): string | null {
  const m = /^(.+)-[^-]+-[^-]+\.(?:no)?src\.rpm$/.exec(srpm);
  return m ? m[1] : null;
}

/** Packages of header blobs (null: a row that held no blob); unreadable ones are counted. */
export function packagesFromHeaders(blobs: (Uint8Array | null)[], location: string): ParseResult {
  const packages: Package[] = [];
  let bad = 0;
  for (const blob of blobs) {
    let h: RpmHeader;
    try {
      if (!blob) throw new RpmHeaderError("no blob");
      h = parseRpmHeaderBlob(blob);
    } catch {
      bad++;
      continue;
    }
    if (h.name === "gpg-pubkey") continue;
    const evr = `${
      h.epoch !== null && h.epoch !== 0 ? `${h.epoch}:` : ""
    }${h.version}-${h.release}`;
    const p: Package = { name: h.name, version: evr, type: "rpm", location };
    if (h.arch) p.arch = h.arch;
    const src = h.sourcerpm ? sourceName(h.sourcerpm) : null;
    if (src) {
      p.source_name = src;
      p.source_version = evr;
    }
    packages.push(p);
  }
  const warnings = bad ? [`${location}: ${bad} unreadable package header(s) skipped`] : [];
  return { packages, warnings };
}

/** rpm's BerkeleyDB `Packages` (rpm < 4.16), through lib/scan/rpm_bdb.ts. */
export function parseRpmBdb(bytes: Uint8Array, location: string): ParseResult {
  let r;
  try {
    r = bdbHashValues(bytes);
  } catch (e) {
    return {
      packages: [],
      warnings: [`${location}: not a readable rpm BerkeleyDB database (${(e as Error).message})`],
    };
  }
  // rpm keeps a 4-byte counter under key 0 beside the headers: not a package.
  const out = packagesFromHeaders(r.values.filter((v) => v.length >= 16), location);
  if (r.skipped) out.warnings.push(`${location}: ${r.skipped} unreadable database item(s) skipped`);
  return out;
}

export function parseRpmSqlite(bytes: Uint8Array, location: string): ParseResult {
  const packages: Package[] = [];
  const warnings: string[] = [];
  let tmp: string | null = null;
  let db: DatabaseSync | null = null;
  try {
    tmp = Deno.makeTempFileSync({ prefix: "wharf-rpmdb-", suffix: ".sqlite" });
    Deno.writeFileSync(tmp, bytes);
    db = new DatabaseSync(tmp, { readOnly: true });
    const rows = db.prepare(`SELECT blob FROM Packages LIMIT ${MAX_ROWS + 1}`).all() as {
      blob: Uint8Array;
    }[];
    const blobs = rows.slice(0, MAX_ROWS).map((r) => r.blob instanceof Uint8Array ? r.blob : null);
    const r = packagesFromHeaders(blobs, location);
    packages.push(...r.packages);
    warnings.push(...r.warnings);
    if (rows.length > MAX_ROWS) warnings.push(`${location}: more than ${MAX_ROWS} packages`);
  } catch (e) {
    warnings.push(
      `${location}: not a readable rpm sqlite database (${
        String((e as Error)?.message ?? e).slice(0, 200)
      })`,
    );
  } finally {
    try {
      db?.close();
    } catch {
      // already closed
    }
    if (tmp) {
      try {
        Deno.removeSync(tmp);
      } catch {
        // the temp dir's cleaner takes it
      }
    }
  }
  return { packages, warnings };
}
