// Random access into gzip layers (SPEC Layer file 6, DESIGN.md "gzip random access"): one pass
// over the compressed bytes records a checkpoint — compressed offset, uncompressed offset and
// the 32 KiB of output before it — at the first deflate block boundary after every 4 MiB of
// output. A read starts at the nearest checkpoint: a stored block carrying the window, then the
// compressed bytes from there, inflated raw, so it inflates about 4 MiB (plus up to one block).
//
// Most block boundaries are not byte-aligned (zlib's examples/zran.c takes them all, recording
// the unused bits of the last byte): `gzip -9` of zeros has no aligned one in 8 GiB, and with
// aligned checkpoints only, a read of its last file inflated all of it. A read from a boundary
// k bits into a byte goes to inflaters that take whole bytes (DecompressionStream, node:zlib),
// so rather than shifting the whole compressed range by k bits, the prefix after the window is
// padded with empty blocks to end k bits into its last byte, and that byte is merged with the
// blob's: the rest of the range is passed on untouched.
//
// zlib-ng's level 1 (deflate_quick, Deno's own node:zlib too) writes one static-Huffman block for
// as long as its input compresses well (96 MiB of LCG output was one block), so inside a fixed
// block the pass also takes a checkpoint at the first symbol boundary after 4 MiB of output: the
// code there is fixed, so a read needs no tables, only a fixed-block header before the blob's
// bits (`fixed`). To make those positions a function of the stream alone (not of how it was cut
// into chunks, and the same in the native pass), the output is capped so inflate stops exactly 4
// MiB after the last checkpoint, then steps a byte at a time out of a match that straddles it,
// and the checkpoint goes where the next literal or length code begins (never an end-of-block
// code: that boundary is the block's, taken as before). Dynamic blocks get none: their tables
// would have to be stored, and real encoders end them within a few MiB.
//
// The pass uses pako's inflate with Z_BLOCK: node:zlib (much faster) cannot stop at block
// boundaries or say how many bits of the last byte are unused. It runs off the main thread
// (checkpoint_worker.ts) while node:zlib inflates the same bytes for the tar walk.
import * as zinf from "pako-inflate";
import ZStream from "pako-zstream";
import zlib from "node:zlib";

export const CHECKPOINT_SPACING = 4 * 1024 * 1024;
const WINDOW = 32 * 1024;
const Z_BLOCK = 5;
const Z_STREAM_END = 1;
const Z_BUF_ERROR = -5;

export interface Checkpoint {
  /** offset in the uncompressed stream */
  uoff: number;
  /** offset in the compressed blob of the next deflate block (or gzip member header) */
  coff: number;
  /** the output before `uoff` (up to 32 KiB); empty at a member start */
  window: Uint8Array;
  /** `coff` starts a gzip member (header included): read it with gunzip, no window */
  member: boolean;
  /**
   * Unused (high) bits of the byte before `coff` (0-7): the next block starts in that byte, at
   * bit `8 - bits`. Always 0 at a member start.
   */
  bits: number;
  /**
   * Inside a fixed-Huffman block: the bits at `coff`/`bits` are its next literal or length code
   * rather than a block header. Set only on such checkpoints.
   */
  fixed?: boolean;
  /** With `fixed`: that block is the member's last (BFINAL). */
  final?: boolean;
}

/** Where a checkpoint at absolute bit position `pos` of the blob goes: `coff` and `bits`. */
export function bitPosition(pos: number): { coff: number; bits: number } {
  const bits = (8 - (pos % 8)) % 8;
  return { coff: (pos + bits) / 8, bits };
}

interface PakoStream {
  input: Uint8Array;
  next_in: number;
  avail_in: number;
  output: Uint8Array;
  next_out: number;
  avail_out: number;
  data_type: number;
  msg: string;
  state: {
    window: Uint8Array | null;
    mode: number;
    last: boolean | number;
    bits: number;
    back: number;
    length: number;
    was: number;
    lencode: unknown;
    lendyn: unknown;
  };
}

// pako 2.1.0's inflate modes (lib/zlib/inflate.js): LEN_ to LIT are those inside a Huffman block.
const LEN_ = 16199;
const MATCH = 16204;
const LIT = 16205;

/** Feeds compressed chunks in order; `finish` returns the checkpoints. Memory: ~100 KiB. */
export class CheckpointBuilder {
  private readonly zs: PakoStream;
  private readonly out = new Uint8Array(64 * 1024);
  private readonly ring = new Uint8Array(WINDOW);
  private ringFill = 0;
  private ringPos = 0;
  private uout = 0;
  private cin = 0;
  private lastCheckpoint = -Infinity;
  private ended = false;
  readonly checkpoints: Checkpoint[] = [];
  error: string | null = null;

  /**
   * With `onCheckpoint`, each checkpoint goes there as it is made and `checkpoints` keeps only
   * its table entry (an empty window of the right length is not kept either: see `lengths`), so
   * memory does not grow with the layer (a 2 GiB tar has ~520 windows, 16 MiB).
   */
  readonly lengths: number[] = [];

  constructor(
    private readonly spacing = CHECKPOINT_SPACING,
    private readonly onCheckpoint?: (c: Checkpoint) => void,
  ) {
    this.zs = new (ZStream as unknown as new () => PakoStream)();
    zinf.inflateInit2(this.zs, 16 + 15);
    this.zs.output = this.out;
    this.zs.next_out = 0;
    this.zs.avail_out = this.out.length;
  }

  push(chunk: Uint8Array): void {
    if (this.error !== null) return;
    const zs = this.zs;
    zs.input = chunk;
    zs.next_in = 0;
    zs.avail_in = chunk.length;
    while (zs.avail_in > 0 && this.error === null) {
      if (this.ended) {
        // Another gzip member follows (multi-member files are valid gzip).
        if (chunk[zs.next_in] !== 0x1f) {
          this.error = "trailing garbage after the gzip stream";
          return;
        }
        zinf.inflateReset(zs);
        // pako's inflateReset zeroes wsize but keeps the window buffer, and only sizes a
        // window it allocates: without this the next member's back-references all fail.
        zs.state.window = null;
        this.ended = false;
        this.record({
          uoff: this.uout,
          coff: this.cin + zs.next_in,
          window: new Uint8Array(0),
          member: true,
          bits: 0,
        });
        this.lastCheckpoint = this.uout;
      }
      zs.avail_out = Math.min(this.out.length, this.cap());
      const r = zinf.inflate(zs, Z_BLOCK);
      this.drain();
      if (r === Z_STREAM_END) {
        this.ended = true;
        continue;
      }
      if (r < 0 && r !== Z_BUF_ERROR) {
        this.error = `gzip: ${zs.msg || `inflate error ${r}`}`;
        return;
      }
      const atBoundary = (zs.data_type & 128) !== 0 && (zs.data_type & 64) === 0;
      if (atBoundary && this.uout - this.lastCheckpoint >= this.spacing) {
        this.record({
          uoff: this.uout,
          coff: this.cin + zs.next_in,
          window: this.window(),
          member: false,
          bits: zs.data_type & 7,
        });
        this.lastCheckpoint = this.uout;
      } else if (this.due() && this.inFixed() && this.atCode()) {
        // the code just decoded (not yet written) starts `back` bits before the input position
        const st = zs.state;
        this.record({
          uoff: this.uout,
          ...bitPosition((this.cin + zs.next_in) * 8 - st.bits - st.back),
          window: this.window(),
          member: false,
          fixed: true,
          final: Boolean(st.last),
        });
        this.lastCheckpoint = this.uout;
      }
    }
    // Compressed bytes of earlier chunks; within the current one the position is next_in.
    this.cin += chunk.length;
  }

  private due(): boolean {
    return this.uout - this.lastCheckpoint >= this.spacing;
  }

  private inFixed(): boolean {
    const st = this.zs.state;
    return st.mode >= LEN_ && st.mode <= LIT && st.lencode !== st.lendyn;
  }

  /** A literal or length code is decoded and nothing of it written: a symbol boundary. */
  private atCode(): boolean {
    const st = this.zs.state;
    return st.back > 0 && (st.mode !== MATCH || st.length === st.was);
  }

  /** The output the next inflate call may write (see the file's head). */
  private cap(): number {
    if (!this.due()) return this.lastCheckpoint + this.spacing - this.uout;
    if (!this.inFixed()) return Infinity;
    const st = this.zs.state;
    // mid-match: a byte at a time to its end; else decode the next code without writing it
    return st.mode === MATCH && st.length !== st.was ? 1 : 0;
  }

  private drain(): void {
    const zs = this.zs;
    const n = zs.next_out;
    if (n === 0) return;
    this.remember(this.out.subarray(0, n));
    this.uout += n;
    zs.next_out = 0;
    zs.avail_out = this.out.length;
  }

  private remember(b: Uint8Array): void {
    if (b.length >= WINDOW) {
      this.ring.set(b.subarray(b.length - WINDOW));
      this.ringPos = 0;
      this.ringFill = WINDOW;
      return;
    }
    const first = Math.min(b.length, WINDOW - this.ringPos);
    this.ring.set(b.subarray(0, first), this.ringPos);
    this.ring.set(b.subarray(first), 0);
    this.ringPos = (this.ringPos + b.length) % WINDOW;
    this.ringFill = Math.min(WINDOW, this.ringFill + b.length);
  }

  private record(c: Checkpoint): void {
    this.lengths.push(c.window.length);
    if (!this.onCheckpoint) {
      this.checkpoints.push(c);
      return;
    }
    this.checkpoints.push({ ...c, window: new Uint8Array(0) });
    this.onCheckpoint(c);
  }

  private window(): Uint8Array {
    const w = new Uint8Array(this.ringFill);
    if (this.ringFill < WINDOW) {
      w.set(this.ring.subarray(0, this.ringFill));
      return w;
    }
    w.set(this.ring.subarray(this.ringPos));
    w.set(this.ring.subarray(0, this.ringPos), WINDOW - this.ringPos);
    return w;
  }

  /** The checkpoints; `complete` is false when the stream ended mid-member or was corrupt. */
  finish(): { checkpoints: Checkpoint[]; complete: boolean; error: string | null } {
    return {
      checkpoints: this.checkpoints,
      complete: this.ended && this.error === null,
      error: this.error ?? (this.ended ? null : "gzip stream truncated"),
    };
  }
}

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

// A final, empty stored block: appended where a read's compressed range stops at a byte-aligned
// block boundary (the next checkpoint), it makes the cut a complete raw deflate stream.
const FINAL_EMPTY_BLOCK = new Uint8Array([0x01, 0x00, 0x00, 0xff, 0xff]);

/**
 * The blob bytes [start, end] a read from `cp` needs, and whether they stop at `next` (the
 * checkpoint after the read's last byte, when in the same member) rather than the blob's end.
 * A checkpoint k bits into a byte starts with that byte.
 */
export function compressedRange(
  cp: Pick<CheckpointRef, "coff" | "bits">,
  next: Pick<CheckpointRef, "coff" | "member"> | null,
  blobSize: number,
): { start: number; end: number; cut: boolean } {
  const cut = next !== null && !next.member;
  return { start: cp.coff - (cp.bits ? 1 : 0), end: cut ? next.coff - 1 : blobSize - 1, cut };
}

/** LSB-first bit packing, as deflate writes its bit stream. */
class BitWriter {
  readonly bytes: number[] = [];
  private acc = 0;
  private n = 0;
  constructor(first = 0, used = 0) {
    this.acc = first & ((1 << used) - 1);
    this.n = used;
  }
  put(value: number, length: number): this {
    for (let i = 0; i < length; i++) {
      this.acc |= ((value >>> i) & 1) << this.n;
      if (++this.n === 8) {
        this.bytes.push(this.acc);
        this.acc = 0;
        this.n = 0;
      }
    }
    return this;
  }
  /** bits written into the last, partial byte */
  get partialBits(): number {
    return this.n;
  }
  /** the bytes, the partial one (zero-padded) included */
  finish(): Uint8Array {
    return Uint8Array.from(this.n ? [...this.bytes, this.acc] : this.bytes);
  }
}

/** A non-final fixed-Huffman block with nothing in it: 10 bits (header, end-of-block). */
const emptyFixedBlock = (w: BitWriter) => w.put(0, 1).put(1, 2).put(0, 7);

/**
 * A non-final dynamic-Huffman block with nothing in it, 95 bits long: with 10-bit fixed ones,
 * empty blocks reach any bit offset mod 8. Every code in it is complete (two 1-bit codes each),
 * which every inflater accepts, whereas zlib alone takes a lone 1-bit code.
 */
function emptyDynamicBlock(w: BitWriter): void {
  w.put(0, 1).put(2, 2); // not final; dynamic
  w.put(0, 5).put(1, 5).put(15, 4); // 257 literal/length codes, 2 distance codes, 19 code-length codes
  // code-length code lengths in RFC 1951 order 16 17 18 0 8 7 9 6 10 5 11 4 12 3 13 2 14 1 15:
  // only 18 (a run of zeros) and 1 (length 1) are used, one bit each: 1 → 0, 18 → 1
  for (const sym of [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]) {
    w.put(sym === 18 || sym === 1 ? 1 : 0, 3);
  }
  // literal 0 and end-of-block get length 1, literals 1-255 none; both distance codes length 1
  w.put(0, 1); // literal 0: 1
  w.put(1, 1).put(138 - 11, 7); // 138 zeros
  w.put(1, 1).put(117 - 11, 7); // 117 zeros (255 in all)
  w.put(0, 1); // end-of-block: 1
  w.put(0, 1).put(0, 1); // distances 0 and 1: 1
  w.put(1, 1); // end-of-block (literal 0 is code 0, end-of-block code 1)
}

/**
 * The raw deflate prefix that puts `window` in the inflater's history and ends `bits` short of
 * a byte boundary, as the checkpoint's block starts in the blob's byte: its last byte is partial
 * (used bits low) when `bits` > 0. With `fixed` (a checkpoint inside a fixed block) it ends with
 * that block's 3-bit header, so the blob's bits that follow are read as the block's next code.
 */
export function resumePrefix(
  window: Uint8Array,
  bits: number,
  fixed?: { final: boolean },
): Uint8Array {
  const stored = storedWindow(window);
  if (!bits && !fixed) return stored;
  const w = new BitWriter();
  const s = (8 - bits + (fixed ? 5 : 0)) % 8;
  // fixed blocks add 2 bits mod 8, the dynamic one 7
  if (s % 2 === 0) {
    for (let i = 0; i < s / 2; i++) emptyFixedBlock(w);
  } else {
    emptyDynamicBlock(w);
    for (let i = 0; i < ((s - 7 + 8) % 8) / 2; i++) emptyFixedBlock(w);
  }
  if (fixed) w.put(fixed.final ? 1 : 0, 1).put(1, 2);
  const pad = w.finish();
  const out = new Uint8Array(stored.length + pad.length);
  out.set(stored);
  out.set(pad, stored.length);
  return out;
}

/**
 * The end of a range cut `bits` short of a byte boundary: `last` keeps its used bits (none when
 * negative: the range was empty), then a final empty block. A cut inside a fixed block (`next`
 * fixed) first ends that block (end-of-block is 7 zero bits in the fixed code); when it is the
 * last block, that ends the stream.
 */
function finalBlockAfter(
  last: number,
  bits: number,
  next: Pick<CheckpointRef, "fixed" | "final">,
): Uint8Array {
  if (!next.fixed) {
    if (last < 0) return FINAL_EMPTY_BLOCK;
    if (!bits) return Uint8Array.from([last, ...FINAL_EMPTY_BLOCK]);
    return new BitWriter(last, 8 - bits).put(1, 1).put(1, 2).put(0, 7).finish();
  }
  const w = bits && last >= 0 ? new BitWriter(last, 8 - bits) : new BitWriter();
  w.put(0, 7);
  if (!next.final) w.put(1, 1).put(1, 2).put(0, 7);
  const end = w.finish();
  return !bits && last >= 0 ? Uint8Array.from([last, ...end]) : end;
}

/**
 * The raw deflate stream of a read from a checkpoint `bits` into a byte: the prefix, its
 * partial last byte merged with the range's first byte; with `nextBits` (a cut range), the last
 * byte is held back and ends in a final empty block. The rest passes through as it comes.
 */
function spliced(
  prefix: Uint8Array,
  bits: number,
  compressed: ReadableStream<Uint8Array>,
  next: Pick<CheckpointRef, "bits" | "fixed" | "final"> | null,
): ReadableStream<Uint8Array> {
  const nextBits = next === null ? null : next.bits;
  const reader = compressed.getReader();
  const keep = bits ? (1 << (8 - bits)) - 1 : 0;
  let first = true;
  let held = -1;
  let done = false;
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      // A pull that enqueues nothing is not called again (highWaterMark 0): it reads on instead.
      let sent = false;
      const send = (b: Uint8Array) => {
        if (b.length) c.enqueue(b);
        sent ||= b.length > 0;
      };
      while (!sent) {
        if (done) return c.close();
        const r = await reader.read();
        if (r.done) {
          done = true;
          if (first && bits) throw new Error("gzip: compressed range cut short");
          if (first) send(prefix);
          if (next !== null) send(finalBlockAfter(held, next.bits, next));
          return c.close();
        }
        let v = r.value;
        if (v.length === 0) continue;
        if (first) {
          first = false;
          if (bits) {
            const head = prefix.slice();
            const at = head.length - 1;
            head[at] = (head[at] & keep) | (v[0] & ~keep & 0xff);
            if (nextBits !== null && v.length === 1) {
              // the range's one byte is also its last: the merged byte is held back
              send(head.subarray(0, at));
              held = head[at];
              continue;
            }
            send(head);
            v = v.subarray(1);
          } else send(prefix);
        }
        if (nextBits === null) {
          send(v);
          continue;
        }
        if (held >= 0) send(Uint8Array.of(held));
        held = v[v.length - 1];
        send(v.subarray(0, v.length - 1));
      }
    },
    cancel: (reason) => reader.cancel(reason),
  }, { highWaterMark: 0 });
}

/**
 * Inflates from a checkpoint: `compressed` streams the blob's `compressedRange` (to the end of
 * the blob, or with `next` up to that checkpoint's block boundary in the same member); returns
 * the uncompressed bytes from `cp.uoff` on (the window is consumed, not emitted).
 *
 * A cut range goes through the web DecompressionStream (deflate-raw), ~3× node:zlib here for
 * the ~2 MiB an average read inflates; the gzip header of a member start is skipped by hand. A
 * range to the blob's end (the last checkpoint's segment) holds a gzip trailer and maybe more
 * members, which only node:zlib reads without losing output.
 */
export function inflateFrom(
  window: Uint8Array,
  cp: Pick<CheckpointRef, "member" | "bits" | "fixed" | "final">,
  compressed: ReadableStream<Uint8Array>,
  next: Pick<CheckpointRef, "bits" | "fixed" | "final"> | null = null,
): ReadableStream<Uint8Array> {
  const member = cp.member;
  const bits = member ? 0 : cp.bits;
  // Inside the last block, the prefix's header is final too: the stream then ends where the
  // blob's does, before its trailer (to the blob's end), or at a cut's end-of-block.
  const fixed = !member && cp.fixed ? { final: cp.final === true } : undefined;
  if (next === null) {
    if (member) return pipeNode(compressed, zlib.createGunzip({ chunkSize: 256 * 1024 }), 0);
    const raw = bits || fixed
      ? spliced(resumePrefix(window, bits, fixed), bits, compressed, null)
      : concatStreams(storedWindow(window), compressed);
    return rawThenMembers(window.length, raw);
  }
  const body = member ? skipGzipHeader(compressed) : compressed;
  const raw = bits || next.bits || fixed || next.fixed
    ? spliced(resumePrefix(window, bits, fixed), bits, body, next)
    : concatStreams(member ? new Uint8Array(0) : storedWindow(window), body, FINAL_EMPTY_BLOCK);
  let skip = member ? 0 : window.length;
  return raw.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, c) {
        for (let i = 0; i < chunk.length; i += 16 * 1024) {
          c.enqueue(chunk.subarray(i, i + 16 * 1024));
        }
      },
    }),
  ).pipeThrough(
    new DecompressionStream("deflate-raw") as unknown as TransformStream<Uint8Array, Uint8Array>,
  ).pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, c) {
        if (skip >= chunk.length) {
          skip -= chunk.length;
          return;
        }
        c.enqueue(skip ? chunk.subarray(skip) : chunk);
        skip = 0;
      },
    }),
  );
}

/**
 * The rest of a member from a checkpoint inside it (`raw`: the window's prefix, then the blob
 * from the checkpoint on), then every member after it. node:zlib's inflateRaw stops at the end
 * of the deflate stream and cannot say where that was, so a read from the last checkpoint of one
 * member into the next (multi-member gzip: eStargz layers, BGZF, concatenated files) lost
 * everything past the member's end. pako reports where the deflate stream ended; it inflates at
 * most one checkpoint spacing of output before node:zlib's gunzip takes the members that follow.
 */
function rawThenMembers(
  windowLength: number,
  raw: ReadableStream<Uint8Array>,
): ReadableStream<Uint8Array> {
  const reader = raw.getReader();
  const zs = new (ZStream as unknown as new () => PakoStream)();
  zinf.inflateInit2(zs, -15);
  const out = new Uint8Array(64 * 1024);
  zs.output = out;
  zs.next_out = 0;
  zs.avail_out = out.length;
  zs.input = new Uint8Array(0);
  zs.next_in = 0;
  zs.avail_in = 0;
  let skip = windowLength;
  let rest: ReadableStreamDefaultReader<Uint8Array> | null = null;
  let closed = false;
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      for (;;) {
        if (closed) return c.close();
        if (rest) {
          const r = await rest.read();
          return r.done ? c.close() : c.enqueue(r.value);
        }
        if (zs.avail_in === 0) {
          const { value, done } = await reader.read();
          if (done) throw new Error("gzip: unexpected end of file");
          zs.input = value;
          zs.next_in = 0;
          zs.avail_in = value.length;
        }
        const r = zinf.inflate(zs, 0);
        let emit: Uint8Array | null = null;
        if (zs.next_out > skip) emit = out.slice(skip, zs.next_out);
        skip = Math.max(0, skip - zs.next_out);
        zs.next_out = 0;
        zs.avail_out = out.length;
        if (r === Z_STREAM_END) {
          const left = zs.input.subarray(zs.next_in);
          zs.avail_in = 0;
          const members = await afterTrailer(left, reader);
          if (members) {
            rest = pipeNode(members, zlib.createGunzip({ chunkSize: 256 * 1024 }), 0)
              .getReader();
          } else closed = true;
        } else if (r < 0 && r !== Z_BUF_ERROR) {
          throw new Error(`gzip: ${zs.msg || `inflate error ${r}`}`);
        }
        if (emit) return c.enqueue(emit);
      }
    },
    async cancel(reason) {
      await rest?.cancel(reason).catch(() => {});
      await reader.cancel(reason).catch(() => {});
    },
  }, { highWaterMark: 0 });
}

/** The stream after a member's 8-byte trailer, or null when nothing follows it. */
async function afterTrailer(
  left: Uint8Array,
  reader: ReadableStreamDefaultReader<Uint8Array>,
): Promise<ReadableStream<Uint8Array> | null> {
  let trailer = 8;
  let first = left;
  for (;;) {
    const k = Math.min(trailer, first.length);
    trailer -= k;
    first = first.subarray(k);
    if (first.length > 0) break;
    const { value, done } = await reader.read();
    if (done) return null;
    first = value;
  }
  return concatStreams(
    first,
    new ReadableStream<Uint8Array>({
      async pull(c) {
        const r = await reader.read();
        if (r.done) c.close();
        else c.enqueue(r.value);
      },
      cancel: (reason) => reader.cancel(reason),
    }, { highWaterMark: 0 }),
  );
}

/**
 * A non-final stored block holding the window: inflate puts it in its history, then the
 * original stream continues at the block boundary the checkpoint was taken at.
 */
function storedWindow(window: Uint8Array): Uint8Array {
  const head = new Uint8Array(5 + window.length);
  head[0] = 0x00;
  head[1] = window.length & 0xff;
  head[2] = window.length >>> 8;
  head[3] = ~window.length & 0xff;
  head[4] = (~window.length >>> 8) & 0xff;
  head.set(window, 5);
  return head;
}

/** RFC 1952 member header length of `b`, or -1 when more bytes are needed; throws if invalid. */
function gzipHeaderLength(b: Uint8Array): number {
  if (b.length < 10) return -1;
  if (b[0] !== 0x1f || b[1] !== 0x8b || b[2] !== 8) throw new Error("not a gzip member");
  const flags = b[3];
  let at = 10;
  if (flags & 4) {
    if (b.length < at + 2) return -1;
    at += 2 + (b[at] | (b[at + 1] << 8));
  }
  for (const bit of [8, 16]) {
    if (flags & bit) {
      const z = b.indexOf(0, at);
      if (z < 0) return -1;
      at = z + 1;
    }
  }
  if (flags & 2) at += 2;
  return b.length >= at ? at : -1;
}

function skipGzipHeader(s: ReadableStream<Uint8Array>): ReadableStream<Uint8Array> {
  const reader = s.getReader();
  let pending: Uint8Array | null = new Uint8Array(0);
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      while (pending) {
        const { value, done } = await reader.read();
        if (done) throw new Error("gzip header cut short");
        const joined: Uint8Array = new Uint8Array(pending.length + value.length);
        joined.set(pending);
        joined.set(value, pending.length);
        const n = gzipHeaderLength(joined);
        if (n < 0) {
          if (joined.length > 128 * 1024) throw new Error("gzip header too long");
          pending = joined;
          continue;
        }
        pending = null;
        if (n < joined.length) c.enqueue(joined.subarray(n));
        return;
      }
      const { value, done } = await reader.read();
      if (done) c.close();
      else c.enqueue(value);
    },
    cancel: (reason) => reader.cancel(reason),
  }, { highWaterMark: 0 });
}

function concatStreams(
  head: Uint8Array,
  rest: ReadableStream<Uint8Array>,
  tail?: Uint8Array,
): ReadableStream<Uint8Array> {
  let reader: ReadableStreamDefaultReader<Uint8Array> | null = null;
  let sentHead = head.length === 0;
  let done = false;
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      if (!sentHead) {
        sentHead = true;
        c.enqueue(head);
        return;
      }
      if (done) return c.close();
      reader ??= rest.getReader();
      const r = await reader.read();
      if (!r.done) return c.enqueue(r.value);
      done = true;
      if (tail) c.enqueue(tail);
      else c.close();
    },
    cancel(reason) {
      return reader ? reader.cancel(reason) : rest.cancel(reason);
    },
  }, { highWaterMark: 0 });
}

/**
 * Runs `input` through a node:zlib transform with backpressure both ways, dropping the first
 * `skip` output bytes. Cancelling the result stops the transform and the input.
 */
const PIPE_QUEUE = 2 * 1024 * 1024;

export function pipeNode(
  input: ReadableStream<Uint8Array>,
  z: NodeJS.ReadWriteStream & { destroy(e?: Error): void },
  skip: number,
): ReadableStream<Uint8Array> {
  const reader = input.getReader();
  let stopped = false;
  (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done || stopped) break;
        // Up to 2 MiB may wait in the transform: waiting for 'drain' after every chunk (its
        // high-water mark is 16 KiB) ran zstd at a third of its speed. The store's ring reader
        // reuses a buffer 3 chunks of 4 MiB later, so queued chunks are never overwritten.
        z.write(value);
        const w = z as unknown as { writableLength: number };
        if (w.writableLength > PIPE_QUEUE) await new Promise((r) => z.once("drain", r));
      }
      if (!stopped) z.end();
    } catch (e) {
      if (!stopped) z.destroy(e instanceof Error ? e : new Error(String(e)));
    }
  })();
  // node's Readable.toWeb enqueues after a cancel (an uncaught error): adapt by hand, with
  // pause/resume as the backpressure.
  const queue: Uint8Array[] = [];
  let queued = 0;
  let ended = false;
  let failure: Error | null = null;
  let notify: (() => void) | null = null;
  let toSkip = skip;
  const onData = (b: Uint8Array) => {
    if (toSkip >= b.length) {
      toSkip -= b.length;
      return;
    }
    const v = toSkip ? b.subarray(toSkip) : b;
    toSkip = 0;
    queue.push(v);
    queued += v.length;
    if (queued > 1024 * 1024) z.pause();
    notify?.();
  };
  z.on("data", onData);
  z.on("end", () => {
    ended = true;
    notify?.();
  });
  z.on("error", (e: Error) => {
    failure = e;
    notify?.();
  });
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      for (;;) {
        const v = queue.shift();
        if (v) {
          queued -= v.length;
          if (queued <= 256 * 1024) z.resume();
          c.enqueue(v);
          return;
        }
        if (failure) return c.error(failure);
        if (ended) return c.close();
        z.resume();
        await new Promise<void>((r) => (notify = r));
        notify = null;
      }
    },
    async cancel(reason) {
      stopped = true;
      z.off("data", onData);
      z.destroy();
      await reader.cancel(reason).catch(() => {});
    },
  }, { highWaterMark: 0 });
}
