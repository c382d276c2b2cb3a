// The checkpoint table's codec and lookups: gzip_checkpoints.ts makes the checkpoints, this
// stores them and finds the ones a read needs, gzip_read.ts inflates from them.
import type { Checkpoint } from "./gzip_checkpoints.ts";

// --- storage format -----------------------------------------------------------------------
// [u32 count] then per checkpoint [f64 uoff][f64 coff][u32 flags][u32 window length], then the
// windows in order. A 1 GiB layer has ~256 checkpoints: ~8 MiB, read one window at a time.
// flags: bit 0 a member start; bit 1 inside a fixed block, bit 2 that block is final; bits 8-10
// the unused bits before `coff` (INDEX_VERSION 1 tables have none there: they read as aligned
// checkpoints, which they were; version 2 tables have no bit 1: all at block boundaries).

const flagsOf = (c: Checkpoint) =>
  (c.member ? 1 : 0) | (c.fixed ? 2 : 0) | (c.fixed && c.final ? 4 : 0) | ((c.bits & 7) << 8);

const ENTRY = 24;

export function encodeCheckpoints(cps: Checkpoint[]): Uint8Array {
  const head = 4 + cps.length * ENTRY;
  const total = head + cps.reduce((n, c) => n + c.window.length, 0);
  const out = new Uint8Array(total);
  const dv = new DataView(out.buffer);
  dv.setUint32(0, cps.length, true);
  let w = head;
  cps.forEach((c, i) => {
    const at = 4 + i * ENTRY;
    dv.setFloat64(at, c.uoff, true);
    dv.setFloat64(at + 8, c.coff, true);
    dv.setUint32(at + 16, flagsOf(c), true);
    dv.setUint32(at + 20, c.window.length, true);
    out.set(c.window, w);
    w += c.window.length;
  });
  return out;
}

/**
 * The table alone, for a layer whose windows were streamed to their own file in order:
 * `lengths[i]` is checkpoint i's window length.
 */
export function encodeTable(cps: Checkpoint[], lengths: number[]): Uint8Array {
  const out = new Uint8Array(4 + cps.length * ENTRY);
  const dv = new DataView(out.buffer);
  dv.setUint32(0, cps.length, true);
  cps.forEach((c, i) => {
    const at = 4 + i * ENTRY;
    dv.setFloat64(at, c.uoff, true);
    dv.setFloat64(at + 8, c.coff, true);
    dv.setUint32(at + 16, flagsOf(c), true);
    dv.setUint32(at + 20, lengths[i], true);
  });
  return out;
}

export interface CheckpointRef {
  uoff: number;
  coff: number;
  member: boolean;
  bits: number;
  /** as Checkpoint's: present only on checkpoints inside a fixed block */
  fixed?: boolean;
  final?: boolean;
  /** where its window lies in the encoded file */
  windowAt: number;
  windowLength: number;
}

/**
 * The table of an encoded checkpoint file (its first 4 + 24·n bytes). `windowAt` counts from
 * the end of the table (encodeCheckpoints) or, with `separate`, from the start of the windows
 * file (encodeTable). A table cut short throws a RangeError.
 */
export function decodeTable(bytes: Uint8Array, separate = false): CheckpointRef[] {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = bytes.length < 4 ? -1 : dv.getUint32(0, true);
  // checked up front: a damaged count must not allocate entries before the reads run out
  if (n < 0 || bytes.length < 4 + n * ENTRY) {
    throw new RangeError(`checkpoint table of ${bytes.length} bytes is cut short`);
  }
  const out: CheckpointRef[] = [];
  let w = separate ? 0 : 4 + n * ENTRY;
  for (let i = 0; i < n; i++) {
    const at = 4 + i * ENTRY;
    const windowLength = dv.getUint32(at + 20, true);
    const flags = dv.getUint32(at + 16, true);
    const ref: CheckpointRef = {
      uoff: dv.getFloat64(at, true),
      coff: dv.getFloat64(at + 8, true),
      member: (flags & 1) === 1,
      bits: (flags >>> 8) & 7,
      windowAt: w,
      windowLength,
    };
    if (flags & 2) {
      ref.fixed = true;
      ref.final = (flags & 4) !== 0;
    }
    out.push(ref);
    w += windowLength;
  }
  return out;
}

/** The checkpoint at or before `uoff` (the table is in uoff order). */
export function nearest(table: CheckpointRef[], uoff: number): CheckpointRef | null {
  let lo = 0;
  let hi = table.length - 1;
  let best: CheckpointRef | null = null;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    if (table[mid].uoff <= uoff) {
      best = table[mid];
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return best;
}

/**
 * The first checkpoint after `uoff` (it bounds the compressed bytes a read needs), or null. With
 * `from` (the read's checkpoint), a member start between the two is returned instead: a cut
 * range is inflated raw, which cannot go on into another member (a read from one member into the
 * next then runs to the blob's end, the way that reads members).
 */
export function following(
  table: CheckpointRef[],
  uoff: number,
  from?: Pick<CheckpointRef, "uoff" | "coff">,
): CheckpointRef | null {
  let lo = 0;
  let hi = table.length - 1;
  let at = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    if (table[mid].uoff > uoff) {
      at = mid;
      hi = mid - 1;
    } else lo = mid + 1;
  }
  if (at < 0) return null;
  if (from) {
    for (let k = at - 1; k >= 0 && table[k].uoff >= from.uoff; k--) {
      if (table[k].member && table[k].coff > from.coff) return table[k];
    }
  }
  return table[at];
}
