// rpm's BerkeleyDB `Packages` database (rpm < 4.16: CentOS/RHEL 7 and 8, Amazon Linux 2, older
// Fedora): a Berkeley DB Hash database whose values are package header blobs. It is read page by
// page, not through the hash function: every hash page's values (inline, or on a chain of overflow
// pages) are collected, whatever bucket they sit in. Layout (Berkeley DB 5.3, db_page.h):
//   page 0, the hash metadata page: magic 0x061561 at 12 (in the writer's byte order), page size
//     at 20, encryption algorithm at 24, page type 8 at 25, meta flags at 26, last page at 32;
//   every page: a 26-byte header (next page at 16, entries at 20, hf_offset at 22, type at 25)
//     and, on hash pages (type 13, or 2 before 4.6), an array of 2-byte item offsets: items
//     alternate key, value; an item starts with its type: 1 inline data (its length runs to the
//     previous item's offset, or the page end), 3 off-page {pgno at +4, total length at +8};
//   overflow pages (type 7) hold hf_offset bytes of the value after their header.
// Written here: @snyk/rpm-parser reads the same format but stops one page short of the last page
// and skips inline values, and it brings sql.js along. The BDB files in the tests are made by
// Debian's Berkeley DB 5.3 (`db5.3_load`).

const HASH_MAGIC = 0x061561;
const P_HASH_UNSORTED = 2, P_OVERFLOW = 7, P_HASHMETA = 8, P_HASH = 13;
const H_KEYDATA = 1, H_OFFPAGE = 3;
const PAGE_HEADER = 26;
const PAGE_SIZES = new Set([512, 1024, 2048, 4096, 8192, 16384, 32768, 65536]);
const DBMETA_CHKSUM = 0x01;
/** A header blob larger than this is not a package header (rpm caps headers at 256 MiB; real ones are KiBs). */
export const MAX_VALUE = 64 << 20;
const MAX_VALUES = 100_000;

export class BdbError extends Error {}

export interface BdbLimits {
  /** bytes of one value: a larger one is skipped before anything is allocated for it */
  maxValueBytes?: number;
  /** bytes of values read over the whole file (a hostile file can point many items at the same data) */
  maxReadBytes?: number;
}

/** What a walk found besides the values it handed over. */
export interface BdbWalk {
  /** unreadable items */
  skipped: number;
  /** off-page items whose chain another item had already used (a real database never shares one) */
  shared: number;
  /** values over maxValueBytes */
  large: number;
  /** the walk stopped at maxReadBytes */
  overBudget: boolean;
}

/**
 * Every value of a BerkeleyDB hash database, in page order: inline values as views of `b`,
 * overflow values copied out. Linear in the file: an overflow page is read for one value only,
 * and the bytes handed over stop at `maxReadBytes`. Stop early by returning from the loop.
 */
export function* bdbHashItems(
  b: Uint8Array,
  walk: BdbWalk,
  opts: BdbLimits = {},
): Generator<Uint8Array> {
  if (b.length < 512) throw new BdbError("shorter than a metadata page");
  const v = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const le = v.getUint32(12, true) === HASH_MAGIC;
  if (!le && v.getUint32(12, false) !== HASH_MAGIC) throw new BdbError("not a BerkeleyDB hash");
  const u32 = (at: number) => v.getUint32(at, le);
  const u16 = (at: number) => v.getUint16(at, le);
  const pageSize = u32(20);
  if (!PAGE_SIZES.has(pageSize)) throw new BdbError(`page size ${pageSize}`);
  if (b[24] !== 0) throw new BdbError("encrypted");
  if (b[25] !== P_HASHMETA) throw new BdbError(`metadata page of type ${b[25]}`);
  if (b[26] & DBMETA_CHKSUM) throw new BdbError("checksummed pages are not read");
  const pages = Math.min(u32(32), Math.floor(b.length / pageSize) - 1);
  const maxValue = opts.maxValueBytes ?? MAX_VALUE;
  let budget = opts.maxReadBytes ?? Infinity;
  // which overflow pages a value has used: each is read once in the whole walk
  const used = new Uint8Array(pages + 1);

  let shared = false;
  const overflow = (first: number, total: number): Uint8Array | null => {
    // the chain cannot hold more than the pages the file has
    if (total > pages * (pageSize - PAGE_HEADER)) return null;
    const out = new Uint8Array(total);
    let got = 0;
    for (let pg = first; got < total;) {
      if (pg === 0 || pg > pages) return null;
      if (used[pg]) {
        shared = true;
        return null;
      }
      used[pg] = 1;
      const at = pg * pageSize;
      if (b[at + 25] !== P_OVERFLOW) return null;
      const len = u16(at + 22);
      if (len > pageSize - PAGE_HEADER || got + len > total) return null;
      out.set(b.subarray(at + PAGE_HEADER, at + PAGE_HEADER + len), got);
      got += len;
      pg = u32(at + 16);
    }
    return out;
  };
  for (let pg = 1; pg <= pages; pg++) {
    const at = pg * pageSize;
    const type = b[at + 25];
    if (type !== P_HASH && type !== P_HASH_UNSORTED) continue;
    const entries = u16(at + 20);
    if (PAGE_HEADER + entries * 2 > pageSize) {
      walk.skipped++;
      continue;
    }
    const offset = (i: number) => u16(at + PAGE_HEADER + i * 2);
    // Odd items are values (even ones their keys).
    for (let i = 1; i < entries; i += 2) {
      const off = offset(i);
      const end = offset(i - 1);
      if (off < PAGE_HEADER + entries * 2 || off >= pageSize || end > pageSize || end <= off) {
        walk.skipped++;
        continue;
      }
      const item = b[at + off];
      let value: Uint8Array | null = null;
      if (item === H_KEYDATA) {
        value = b.subarray(at + off + 1, at + end);
      } else if (item === H_OFFPAGE && off + 12 <= pageSize) {
        const total = u32(at + off + 8);
        if (total > maxValue) {
          walk.large++;
          continue;
        }
        if (total > budget) {
          walk.overBudget = true;
          return;
        }
        shared = false;
        value = overflow(u32(at + off + 4), total);
      }
      if (!value) {
        if (shared) walk.shared++;
        else walk.skipped++;
        continue;
      }
      if (value.length > budget) {
        walk.overBudget = true;
        return;
      }
      budget -= value.length;
      yield value;
    }
  }
}

/** Every value of a BerkeleyDB hash database; `skipped` counts unreadable ones. */
export function bdbHashValues(
  b: Uint8Array,
  opts: BdbLimits & { maxValues?: number } = {},
): { values: Uint8Array[]; skipped: number } {
  const walk: BdbWalk = { skipped: 0, shared: 0, large: 0, overBudget: false };
  const values: Uint8Array[] = [];
  const max = opts.maxValues ?? MAX_VALUES;
  for (const value of bdbHashItems(b, walk, opts)) {
    if (values.length >= max) break;
    values.push(value);
  }
  return { values, skipped: walk.skipped + walk.shared + walk.large };
}
