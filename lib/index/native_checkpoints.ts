// The gzip checkpoint pass on the system's zlib (libz.so.1, present on every Debian) through
// Deno's FFI: inflate with Z_BLOCK stops at every deflate block boundary and `data_type` says
// how many bits of the last byte it did not use, which node:zlib does not expose. pako does the same in pure JS
// at ~110 MB/s of output and was the gzip index pass's limit (bench/README.md "Layer index");
// native zlib runs it at several times that. Without FFI permission or without libz the pass
// falls back to pako (CheckpointBuilder), which yields identical checkpoints.
//
// Checkpoints inside fixed blocks (gzip_checkpoints.ts's head) need what pako's state shows and
// zlib's hides: the block's type, and whether inflate is between codes. Z_TREES makes inflate stop
// after each block header too, and a fixed block's header is exactly 3 bits (a stored one 35 or
// more, a dynamic one 29 or more), so the distance from the block boundary says the type;
// inflateMark() says how many bits back the code being processed began and how much of it was
// written.
import { ffiGranted, libraryPath } from "./native_libs.ts";
import { bitPosition, type Checkpoint, CHECKPOINT_SPACING } from "./gzip_checkpoints.ts";

const Z_OK = 0;
const Z_STREAM_END = 1;
const Z_BUF_ERROR = -5;
const Z_TREES = 6;
const WINDOW = 32 * 1024;
const OUT = 256 * 1024;

// z_stream on LP64 (x86_64, aarch64 Linux): field offsets in bytes.
const Z_STREAM_SIZE = 112;
const NEXT_IN = 0;
const AVAIL_IN = 8;
const NEXT_OUT = 24;
const AVAIL_OUT = 32;
const MSG = 48;
const DATA_TYPE = 88;

const SYMBOLS = {
  zlibVersion: { parameters: [], result: "pointer" },
  inflateInit2_: { parameters: ["pointer", "i32", "pointer", "i32"], result: "i32" },
  inflate: { parameters: ["pointer", "i32"], result: "i32" },
  inflateReset: { parameters: ["pointer"], result: "i32" },
  inflateEnd: { parameters: ["pointer"], result: "i32" },
  inflateGetDictionary: { parameters: ["pointer", "pointer", "pointer"], result: "i32" },
  inflateMark: { parameters: ["pointer"], result: "i64" },
} as const;

type Zlib = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];
let lib: Zlib | null | undefined;

/** libz through FFI, or null when FFI is not permitted or the library cannot be loaded. */
function zlib(): Zlib | null {
  if (lib !== undefined) return lib;
  lib = null;
  try {
    if (!ffiGranted("zlib")) return lib;
    if (Deno.build.os !== "linux" || !["x86_64", "aarch64"].includes(Deno.build.arch)) return lib;
    lib = Deno.dlopen(libraryPath("zlib"), SYMBOLS).symbols;
  } catch {
    lib = null;
  }
  return lib;
}

const addr = (b: Uint8Array): bigint =>
  BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(b as Uint8Array<ArrayBuffer>)));

/** Whether native zlib can be used in this process (and so in its workers). */
export function nativeZlibAvailable(): boolean {
  return zlib() !== null;
}

/**
 * Same contract as CheckpointBuilder (push compressed chunks in order, then finish); a chunk's
 * bytes are used only until the chunk is consumed. With `emit`, it is also the inflater: feed
 * a chunk, then take full output buffers from `next` until it returns null (the chunk is used
 * up), and the last partial one from `flush`; each buffer handed out is fresh (transferable).
 * Create it with `NativeCheckpointBuilder.create`, which returns null without native zlib.
 */
export class NativeCheckpointBuilder {
  private readonly strm = new Uint8Array(Z_STREAM_SIZE);
  private readonly dv = new DataView(this.strm.buffer);
  private out = new Uint8Array(OUT);
  private outAddr = addr(this.out);
  private outFill = 0;
  private readonly dict = new Uint8Array(WINDOW);
  // V8 keeps typed arrays of up to 64 bytes inside its heap, where a GC may move them; every
  // buffer whose address zlib holds is larger (a short chunk is copied into `small`).
  private readonly dictLen = new Uint32Array(32);
  private readonly small = new Uint8Array(4096);
  private input: Uint8Array | null = null;
  private inputAddr = 0n;
  private pendingOutput = false;
  private uout = 0;
  private cin = 0;
  private lastCheckpoint = -Infinity;
  private ended = false;
  private closed = false;
  /** bit position of the last block boundary (its header follows), -1 before the first */
  private blockAt = -1;
  /** the current block is a fixed-Huffman one (and its header is read) */
  private inFixed = false;
  readonly checkpoints: Checkpoint[] = [];
  readonly lengths: number[] = [];
  error: string | null = null;

  static create(
    spacing = CHECKPOINT_SPACING,
    onCheckpoint?: (c: Checkpoint) => void,
    emit = false,
  ): NativeCheckpointBuilder | null {
    const z = zlib();
    return z ? new NativeCheckpointBuilder(z, spacing, emit, onCheckpoint) : null;
  }

  private constructor(
    private readonly z: Zlib,
    private readonly spacing: number,
    private readonly emit: boolean,
    private readonly onCheckpoint?: (c: Checkpoint) => void,
  ) {
    const r = z.inflateInit2_(
      Deno.UnsafePointer.of(this.strm),
      16 + 15,
      z.zlibVersion(),
      Z_STREAM_SIZE,
    );
    if (r !== Z_OK) throw new Error(`inflateInit2 failed: ${r}`);
  }

  /** Bytes of output so far. */
  get produced(): number {
    return this.uout;
  }

  /** Whether the chunk last fed is used up (the next one may be fed). */
  get needsInput(): boolean {
    return this.input === null;
  }

  push(chunk: Uint8Array): void {
    this.feed(chunk);
    while (this.next() !== null) { /* checkpoints only: output is dropped */ }
  }

  feed(chunk: Uint8Array): void {
    if (this.input !== null) throw new Error("the previous chunk is not used up");
    if (chunk.length <= this.small.length) {
      this.small.set(chunk);
      chunk = this.small.subarray(0, chunk.length);
    }
    this.input = chunk;
    this.inputAddr = addr(chunk);
    this.setInput(0);
  }

  private setInput(consumed: number): void {
    this.dv.setBigUint64(NEXT_IN, this.inputAddr + BigInt(consumed), true);
    this.dv.setUint32(AVAIL_IN, this.input!.length - consumed, true);
  }

  /** A full output buffer (with `emit`), or null once the fed chunk is used up. */
  next(): Uint8Array | null {
    const chunk = this.input;
    if (chunk === null) return null;
    const z = this.z;
    const strm = Deno.UnsafePointer.of(this.strm);
    const dv = this.dv;
    for (;;) {
      const availIn = dv.getUint32(AVAIL_IN, true);
      const consumed = chunk.length - availIn;
      if (this.error !== null || this.closed || (availIn === 0 && !this.pendingOutput)) {
        this.cin += chunk.length;
        this.input = null;
        return null;
      }
      if (this.ended) {
        if (availIn === 0) {
          this.pendingOutput = false;
          continue;
        }
        // Another gzip member follows (multi-member files are valid gzip).
        if (chunk[consumed] !== 0x1f) {
          this.error = "trailing garbage after the gzip stream";
          continue;
        }
        z.inflateReset(strm);
        this.setInput(consumed);
        this.ended = false;
        this.blockAt = -1;
        this.inFixed = false;
        this.record({
          uoff: this.uout,
          coff: this.cin + consumed,
          window: new Uint8Array(0),
          member: true,
          bits: 0,
        });
        this.lastCheckpoint = this.uout;
      }
      const room = Math.min(OUT - this.outFill, this.cap());
      dv.setBigUint64(NEXT_OUT, this.outAddr + BigInt(this.outFill), true);
      dv.setUint32(AVAIL_OUT, room, true);
      const r = z.inflate(strm, Z_TREES);
      const produced = room - dv.getUint32(AVAIL_OUT, true);
      this.uout += produced;
      this.outFill += produced;
      // A full output buffer may leave output pending inside zlib with no input left.
      this.pendingOutput = room > 0 && produced === room;
      if (r === Z_STREAM_END) {
        this.ended = true;
        this.pendingOutput = false;
      } else if (r !== Z_OK && r !== Z_BUF_ERROR) {
        this.error = `gzip: ${this.message() ?? `inflate error ${r}`}`;
      } else {
        // Z_BUF_ERROR: no progress possible, the input is used up (the next chunk continues it);
        // or a stop after a block header whose bits were already taken in
        if (r === Z_BUF_ERROR && produced === 0) this.pendingOutput = false;
        const dataType = dv.getInt32(DATA_TYPE, true);
        const pos = (this.cin + chunk.length - dv.getUint32(AVAIL_IN, true)) * 8 -
          (dataType & 63);
        if (dataType & 128) {
          this.blockAt = pos;
          this.inFixed = false;
        } else if (dataType & 256) {
          this.inFixed = this.blockAt >= 0 && pos - this.blockAt === 3;
        }
        const atBoundary = (dataType & 128) !== 0 && (dataType & 64) === 0;
        if (atBoundary && this.due()) {
          this.record({
            uoff: this.uout,
            coff: this.cin + chunk.length - dv.getUint32(AVAIL_IN, true),
            window: this.window(),
            member: false,
            bits: dataType & 7,
          });
          this.lastCheckpoint = this.uout;
        } else if (this.inFixed && this.due()) {
          const { back, emitted } = this.mark();
          // a literal or length code decoded and nothing of it written: a symbol boundary
          if (back > 0 && emitted === 0) {
            this.record({
              uoff: this.uout,
              ...bitPosition(pos - back),
              window: this.window(),
              member: false,
              fixed: true,
              final: (dataType & 64) !== 0,
            });
            this.lastCheckpoint = this.uout;
          }
        }
      }
      if (this.outFill === OUT) {
        this.outFill = 0;
        if (this.emit) {
          const full = this.out;
          this.out = new Uint8Array(OUT);
          this.outAddr = addr(this.out);
          return full;
        }
      }
    }
  }

  private due(): boolean {
    return this.uout - this.lastCheckpoint >= this.spacing;
  }

  private mark(): { back: number; emitted: number } {
    const m = BigInt(this.z.inflateMark(Deno.UnsafePointer.of(this.strm)));
    return { back: Number(m >> 16n), emitted: Number(m & 0xffffn) };
  }

  /** The output the next inflate call may write (as CheckpointBuilder's). */
  private cap(): number {
    if (!this.due()) return this.lastCheckpoint + this.spacing - this.uout;
    if (!this.inFixed) return OUT;
    // mid-match: a byte at a time to its end; else decode the next code without writing it
    return this.mark().emitted > 0 ? 1 : 0;
  }

  /** The output not handed out yet (with `emit`), once the input is complete. */
  flush(): Uint8Array {
    const rest = this.emit ? this.out.subarray(0, this.outFill) : new Uint8Array(0);
    this.outFill = 0;
    return rest;
  }

  private message(): string | null {
    const p = Deno.UnsafePointer.create(this.dv.getBigUint64(MSG, true));
    return p ? Deno.UnsafePointerView.getCString(p) : null;
  }

  /** The last (up to) 32 KiB of output, as zlib keeps it. */
  private window(): Uint8Array {
    const r = this.z.inflateGetDictionary(
      Deno.UnsafePointer.of(this.strm),
      Deno.UnsafePointer.of(this.dict),
      Deno.UnsafePointer.of(this.dictLen),
    );
    if (r !== Z_OK) throw new Error(`inflateGetDictionary failed: ${r}`);
    return this.dict.slice(0, this.dictLen[0]);
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

  finish(): { checkpoints: Checkpoint[]; complete: boolean; error: string | null } {
    if (!this.closed) {
      this.closed = true;
      this.z.inflateEnd(Deno.UnsafePointer.of(this.strm));
    }
    return {
      checkpoints: this.checkpoints,
      complete: this.ended && this.error === null,
      error: this.error ?? (this.ended ? null : "gzip stream truncated"),
    };
  }
}
