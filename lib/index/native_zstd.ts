// zstd decompression on the system's libzstd (libzstd.so.1: dpkg depends on it, so every Debian
// has it) through Deno's FFI, for the index worker: node:zlib's zstd runs synchronously on the
// calling thread, and on the main thread it was a third of the zstd index pass (bench/README.md
// "Layer index"). Same feed/next/flush/finish shape as NativeCheckpointBuilder in emit mode;
// without FFI or libzstd the pass keeps node:zlib on the main thread.
import { ffiGranted, libraryPath } from "./native_libs.ts";

const SYMBOLS = {
  ZSTD_createDStream: { parameters: [], result: "pointer" },
  ZSTD_freeDStream: { parameters: ["pointer"], result: "usize" },
  ZSTD_initDStream: { parameters: ["pointer"], result: "usize" },
  ZSTD_decompressStream: { parameters: ["pointer", "pointer", "pointer"], result: "usize" },
  ZSTD_isError: { parameters: ["usize"], result: "u32" },
  ZSTD_getErrorName: { parameters: ["usize"], result: "pointer" },
} as const;

type Zstd = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];
let lib: Zstd | null | undefined;

function zstd(): Zstd | null {
  if (lib !== undefined) return lib;
  lib = null;
  try {
    if (!ffiGranted("zstd")) return lib;
    if (Deno.build.os !== "linux" || !["x86_64", "aarch64"].includes(Deno.build.arch)) return lib;
    lib = Deno.dlopen(libraryPath("zstd"), SYMBOLS).symbols;
  } catch {
    lib = null;
  }
  return lib;
}

export function nativeZstdAvailable(): boolean {
  return zstd() !== null;
}

const OUT = 256 * 1024;
const addr = (b: Uint8Array): bigint =>
  BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(b as Uint8Array<ArrayBuffer>)));

/** Decodes a zstd stream (any number of frames) fed in chunks; output in fresh 256 KiB buffers. */
export class NativeZstdDecoder {
  // ZSTD_inBuffer / ZSTD_outBuffer: { ptr, size, pos } (3 × 8 bytes); over V8's 64-byte limit
  // for in-heap typed arrays, so a GC never moves them while libzstd holds their address.
  private readonly io = new BigUint64Array(16);
  private readonly small = new Uint8Array(4096);
  private readonly ds: Deno.PointerValue;
  private out = new Uint8Array(OUT);
  private outFill = 0;
  private input: Uint8Array | null = null;
  /** the last call's hint: 0 once a frame is complete and flushed */
  private hint = 0n;
  private pendingOutput = false;
  private sawInput = false;
  private closed = false;
  produced = 0;
  error: string | null = null;
  readonly checkpoints = [];
  readonly lengths: number[] = [];

  static create(): NativeZstdDecoder | null {
    const z = zstd();
    return z ? new NativeZstdDecoder(z) : null;
  }

  private constructor(private readonly z: Zstd) {
    this.ds = z.ZSTD_createDStream();
    if (this.ds === null) throw new Error("ZSTD_createDStream failed");
    z.ZSTD_initDStream(this.ds);
  }

  get needsInput(): boolean {
    return this.input === null;
  }

  feed(chunk: Uint8Array): void {
    if (this.input !== null) throw new Error("the previous chunk is not used up");
    if (chunk.length <= this.small.length) {
      this.small.set(chunk);
      chunk = this.small.subarray(0, chunk.length);
    }
    this.input = chunk;
    if (chunk.length > 0) this.sawInput = true;
    this.io[0] = addr(chunk);
    this.io[1] = BigInt(chunk.length);
    this.io[2] = 0n;
  }

  /** A full output buffer, or null once the fed chunk is used up. */
  next(): Uint8Array | null {
    if (this.input === null) return null;
    const z = this.z;
    const inPtr = Deno.UnsafePointer.of(this.io);
    const outPtr = Deno.UnsafePointer.of(this.io.subarray(4));
    for (;;) {
      const left = this.io[1] - this.io[2];
      if (this.error !== null || this.closed || (left === 0n && !this.pendingOutput)) {
        this.input = null;
        return null;
      }
      this.io[4] = addr(this.out);
      this.io[5] = BigInt(OUT);
      this.io[6] = BigInt(this.outFill);
      const r = BigInt(z.ZSTD_decompressStream(this.ds, outPtr, inPtr));
      const produced = Number(this.io[6]) - this.outFill;
      this.outFill += produced;
      this.produced += produced;
      if (z.ZSTD_isError(r)) {
        const name = z.ZSTD_getErrorName(r);
        this.error = `zstd: ${name ? Deno.UnsafePointerView.getCString(name) : "error"}`;
        continue;
      }
      this.hint = r;
      // A full output buffer may leave decoded bytes inside libzstd with no input left.
      this.pendingOutput = this.outFill === OUT;
      if (produced === 0 && this.io[1] - this.io[2] === 0n) this.pendingOutput = false;
      if (this.outFill === OUT) {
        const full = this.out;
        this.out = new Uint8Array(OUT);
        this.outFill = 0;
        return full;
      }
    }
  }

  flush(): Uint8Array {
    const rest = this.out.subarray(0, this.outFill);
    this.outFill = 0;
    return rest;
  }

  finish(): { checkpoints: never[]; complete: boolean; error: string | null } {
    if (!this.closed) {
      this.closed = true;
      this.z.ZSTD_freeDStream(this.ds);
    }
    const complete = this.error === null && this.sawInput && this.hint === 0n;
    return {
      checkpoints: [],
      complete,
      error: this.error ?? (complete ? null : "zstd stream truncated"),
    };
  }
}
