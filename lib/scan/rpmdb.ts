// rpm's package database as rpm >= 4.16 writes it (`rpmdb.sqlite`: RHEL/Rocky/Alma 9, Fedora 33+):
// a `Packages` table of header blobs, read with node:sqlite (built into Deno) from an in-memory
// copy, each header parsed here. A header is an index of (tag, type, offset, count) entries over
// a data store; every offset and count is checked against the blob, so a corrupt header is
// skipped with a warning.
//
// The database file is the pusher's: its schema can make `Packages` a view (a recursive one runs
// without end; one over a small table can return any number of huge rows), a virtual table, or a
// table whose `blob` is computed. Only a plain stored table is read, through an authorizer that
// lets the one SELECT touch nothing else, with a row LIMIT, a size bound on each blob checked
// before it is loaded, and a bound on the bytes read in total.
import { DatabaseSync } from "node:sqlite";
import type { DbLimits, LimitedResult, Package, ParseOptions } from "./package_types.ts";
import { bdbHashItems, type BdbWalk } from "./rpm_bdb.ts";

const TAG = { NAME: 1000, VERSION: 1001, RELEASE: 1002, EPOCH: 1003, ARCH: 1022, SOURCERPM: 1044 };
const STRING_TAGS = new Set([TAG.NAME, TAG.VERSION, TAG.RELEASE, TAG.ARCH, TAG.SOURCERPM]);
const TYPE_INT32 = 4, TYPE_STRING = 6, TYPE_STRING_ARRAY = 8, TYPE_I18NSTRING = 9;
const MAX_INDEX = 100_000;
/** Default package bound when a parser is called on its own (inventory() passes its own). */
const MAX_ROWS = 100_000;
/** Longer than any real header (rpm's own cap is 256 MiB; real ones are KiBs to a few MiB). */
export const MAX_RPM_HEADER_BYTES = 32 << 20;
/**
 * Header bytes read from one database, as a multiple of its file size: a sound database holds
 * each header once, so its headers add up to less than the file.
 */
export const RPM_READ_FACTOR = 2;
/** Bytes of a name, version, release, arch or source rpm string. */
const MAX_STRING = 4096;

export interface RpmHeader {
  name: string;
  version: string;
  release: string;
  epoch: number | null;
  arch: string | null;
  sourcerpm: string | null;
}

export class RpmHeaderError extends Error {}

/**
 * The fields of one header blob (`il`, `dl`, `il` index entries, then `dl` bytes of data). Only
 * the reported tags' strings are read, each up to `maxString` bytes, so the work is linear in
 * the blob whatever its entries point at.
 */
export function parseRpmHeaderBlob(b: Uint8Array, maxString = MAX_STRING): RpmHeader {
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
      if (!STRING_TAGS.has(tag) || strings.has(tag)) continue;
      const start = data + off;
      const end = b.subarray(start, Math.min(data + dl, start + maxString + 1)).indexOf(0);
      if (end < 0) throw new RpmHeaderError(`tag ${tag}: unterminated or overlong string`);
      strings.set(tag, dec.decode(b.subarray(start, start + end)));
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

/**
 * Packages of header blobs (null: a row that held no blob); unreadable ones are counted. Stops
 * at `maxPackages` (truncated set), so a lazy iterable is read no further than that.
 */
export function packagesFromHeaders(
  blobs: Iterable<Uint8Array | null>,
  location: string,
  opts: ParseOptions = {},
): LimitedResult {
  const max = opts.maxPackages ?? MAX_ROWS;
  const packages: Package[] = [];
  let bad = 0;
  let truncated = false;
  for (const blob of blobs) {
    let h: RpmHeader;
    try {
      if (!blob) throw new RpmHeaderError("no blob");
      h = parseRpmHeaderBlob(blob, opts.maxFieldBytes ?? MAX_STRING);
    } catch {
      bad++;
      continue;
    }
    if (h.name === "gpg-pubkey") continue;
    if (packages.length >= max) {
      truncated = true;
      break;
    }
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
  if (truncated) {
    const limit = opts.packageLimit ?? max;
    warnings.push(
      `${location}: more than ${limit} packages${
        limit !== max ? " in the image" : ""
      }, the rest not listed`,
    );
  }
  return { packages, warnings, truncated };
}

const readBudget = (bytes: Uint8Array, opts: DbLimits) =>
  opts.maxRpmReadBytes ?? RPM_READ_FACTOR * bytes.length;

/** rpm's BerkeleyDB `Packages` (rpm < 4.16), through lib/scan/rpm_bdb.ts. */
export function parseRpmBdb(
  bytes: Uint8Array,
  location: string,
  opts: ParseOptions = {},
): LimitedResult {
  const walk: BdbWalk = { skipped: 0, shared: 0, large: 0, overBudget: false };
  const maxRead = readBudget(bytes, opts);
  const maxHeader = opts.maxRpmHeaderBytes ?? MAX_RPM_HEADER_BYTES;
  let out: LimitedResult;
  try {
    const items = bdbHashItems(bytes, walk, { maxValueBytes: maxHeader, maxReadBytes: maxRead });
    // rpm keeps a 4-byte counter under key 0 beside the headers: not a package.
    out = packagesFromHeaders(
      (function* () {
        for (const v of items) if (v.length >= 16) yield v;
      })(),
      location,
      opts,
    );
  } catch (e) {
    return {
      packages: [],
      warnings: [`${location}: not a readable rpm BerkeleyDB database (${(e as Error).message})`],
    };
  }
  if (walk.skipped) {
    out.warnings.push(`${location}: ${walk.skipped} unreadable database item(s) skipped`);
  }
  if (walk.shared) {
    out.warnings.push(
      `${location}: ${walk.shared} item(s) sharing another's overflow pages skipped`,
    );
  }
  if (walk.large) {
    out.warnings.push(`${location}: ${walk.large} header(s) over ${maxHeader} bytes skipped`);
  }
  if (walk.overBudget) {
    out.warnings.push(`${location}: stopped after ${maxRead} bytes of headers, the rest not read`);
  }
  return out;
}

// sqlite's authorizer action codes (sqlite3.h)
const SQLITE_OK = 0, SQLITE_DENY = 1;
const SQLITE_READ = 20, SQLITE_SELECT = 21, SQLITE_FUNCTION = 31;

export function parseRpmSqlite(
  bytes: Uint8Array,
  location: string,
  opts: ParseOptions = {},
): LimitedResult {
  const max = opts.maxPackages ?? MAX_ROWS;
  const maxHeader = opts.maxRpmHeaderBytes ?? MAX_RPM_HEADER_BYTES;
  let budget = readBudget(bytes, opts);
  const warnings: string[] = [];
  let db: DatabaseSync | null = null;
  let large = 0, overBudget = false;
  let out: LimitedResult = { packages: [], warnings };
  const fail = (why: string) => ({
    packages: [],
    warnings: [`${location}: not a readable rpm sqlite database (${why.slice(0, 200)})`],
  });
  try {
    db = new DatabaseSync(":memory:");
    // rpm writes its database in WAL mode, which an in-memory copy cannot open: the header's
    // read/write versions are set to the rollback journal's (1) for the copy and put back.
    const wal = bytes.length > 19 && bytes[18] === 2 && bytes[19] === 2;
    if (wal) bytes[18] = bytes[19] = 1;
    try {
      db.deserialize(bytes);
    } finally {
      if (wal) bytes[18] = bytes[19] = 2;
    }
    db.enableDefensive(true);
    db.exec("PRAGMA query_only = ON; PRAGMA trusted_schema = OFF; PRAGMA cell_size_check = ON;");
    // node:sqlite offers no progress handler; these bound what one statement can build
    const limits = db.limits as unknown as Record<string, number>;
    limits.length = Math.max(maxHeader, 1 << 20);
    limits.sqlLength = 1 << 16;
    const kinds = db.prepare(
      "SELECT type, sql FROM sqlite_master WHERE name = 'Packages' COLLATE NOCASE",
    ).all() as { type: string; sql: string | null }[];
    if (kinds.length !== 1 || kinds[0].type !== "table") {
      return fail(`Packages is ${kinds.map((k) => k.type).join(", ") || "missing"}, not a table`);
    }
    if (/^\s*CREATE\s+VIRTUAL\b/i.test(kinds[0].sql ?? "")) return fail("Packages is virtual");
    const cols = db.prepare("PRAGMA table_xinfo(Packages)").all() as {
      name: string;
      hidden: number;
      dflt_value: string | null;
    }[];
    const blobCol = cols.find((c) => c.name.toLowerCase() === "blob");
    // a generated column, or a default for rows stored before the column, is computed on read
    if (!blobCol || blobCol.hidden !== 0 || blobCol.dflt_value !== null) {
      return fail("Packages.blob is not a stored column");
    }
    // nothing but the one table's columns and length(): no view, trigger or recursion
    db.setAuthorizer((action: number, a1: string | null, a2: string | null, _db, inner) => {
      if (inner !== null) return SQLITE_DENY;
      if (action === SQLITE_SELECT) return SQLITE_OK;
      if (action === SQLITE_READ && a1?.toLowerCase() === "packages") return SQLITE_OK;
      if (action === SQLITE_FUNCTION && a2?.toLowerCase() === "length") return SQLITE_OK;
      return SQLITE_DENY;
    });
    const rows = db.prepare(
      `SELECT CASE WHEN length(blob) <= ${maxHeader} THEN blob END AS blob, length(blob) AS n
       FROM Packages LIMIT ${max + 1}`,
    ).iterate() as Iterable<{ blob: unknown; n: unknown }>;
    out = packagesFromHeaders(
      (function* () {
        for (const r of rows) {
          const n = typeof r.n === "number" ? r.n : 0;
          if (n > maxHeader) {
            large++;
            continue;
          }
          if (n > budget) {
            overBudget = true;
            return;
          }
          budget -= n;
          yield r.blob instanceof Uint8Array ? r.blob : null;
        }
      })(),
      location,
      opts,
    );
  } catch (e) {
    return fail(String((e as Error)?.message ?? e));
  } finally {
    try {
      db?.close();
    } catch {
      // already closed
    }
  }
  if (large) out.warnings.push(`${location}: ${large} header(s) over ${maxHeader} bytes skipped`);
  if (overBudget) {
    out.warnings.push(
      `${location}: stopped after ${readBudget(bytes, opts)} bytes of headers, the rest not read`,
    );
  }
  return out;
}
