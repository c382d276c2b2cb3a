// The raw deflate bits a read puts around the blob's compressed range (gzip_checkpoints.ts's
// head): the stored block carrying the window, the empty blocks that pad it to end k bits into a
// byte (or with a fixed block's header), and the final block that ends a cut range.
import type { CheckpointRef } from "./checkpoint_table.ts";

// A final, empty stored block: appended where a read's compressed range stops at a byte-aligned
// block boundary (the next checkpoint), it makes the cut a complete raw deflate stream.
export const FINAL_EMPTY_BLOCK = new Uint8Array([0x01, 0x00, 0x00, 0xff, 0xff]);

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
export function finalBlockAfter(
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
 * A non-final stored block holding the window: inflate puts it in its history, then the
 * original stream continues at the block boundary the checkpoint was taken at.
 */
export function storedWindow(window: Uint8Array): Uint8Array {
  const head = new Uint8Array(5 + window.length);
  head[0] = 0x00;
  head[1] = window.length & 0xff;
  head[2] = window.length >>> 8;
  head[3] = ~window.length & 0xff;
  head[4] = (~window.length >>> 8) & 0xff;
  head.set(window, 5);
  return head;
}
