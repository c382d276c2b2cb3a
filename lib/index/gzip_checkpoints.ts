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
import { type PakoStream, Z_BUF_ERROR, Z_STREAM_END } from "./pako_stream.ts";

export const CHECKPOINT_SPACING = 4 * 1024 * 1024;
const WINDOW = 32 * 1024;
const Z_BLOCK = 5;

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
