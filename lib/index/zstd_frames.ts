// Random access into zstd layers. A zstd stream cannot be entered mid-way (its window reaches
// back up to 128 MiB and frames carry no restart points), so the index pass writes a seekable
// side copy: the uncompressed stream recompressed as independent frames of FRAME_SIZE bytes of
// output each (level 1: ~380 MB/s here, ~36% of the tar's size), plus a table of where each
// frame starts. A file read decompresses one or two frames. See bench/README.md for the cost.
import zlib from "node:zlib";

export const FRAME_SIZE = 1024 * 1024;
// Frames compressing at once (on libuv's pool, beside the walk): compressing them one at a time
// stalled the whole pass on each (565 MB of tar: 4.2 s).
const IN_FLIGHT = 3;

export interface Frame {
  uoff: number;
  coff: number;
  clen: number;
  ulen: number;
}

const compress = (b: Uint8Array) =>
  new Promise<Uint8Array>((resolve, reject) =>
    zlib.zstdCompress(
      b,
      { params: { [zlib.constants.ZSTD_c_compressionLevel]: 1 } },
      (e: Error | null, out: Uint8Array) => (e ? reject(e) : resolve(out)),
    )
  );

/**
 * Cuts the uncompressed stream into frames and writes them compressed to `sink`. Memory: one
 * frame being filled and up to IN_FLIGHT being compressed.
 */
export class FrameWriter {
  private buf = new Uint8Array(FRAME_SIZE);
  private fill = 0;
  private uoff = 0;
  private coff = 0;
  readonly frames: Frame[] = [];
  private readonly inFlight: {
    ulen: number;
    out: Promise<Uint8Array>;
    buf: Uint8Array<ArrayBuffer>;
  }[] = [];
  /** frame buffers whose compression finished, reused (a fresh 1 MiB per frame is RSS) */
  private readonly spare: Uint8Array<ArrayBuffer>[] = [];

  constructor(private readonly sink: WritableStreamDefaultWriter<Uint8Array>) {}

  async push(chunk: Uint8Array): Promise<void> {
    let at = 0;
    while (at < chunk.length) {
      const n = Math.min(chunk.length - at, FRAME_SIZE - this.fill);
      this.buf.set(chunk.subarray(at, at + n), this.fill);
      this.fill += n;
      at += n;
      if (this.fill === FRAME_SIZE) await this.flush();
    }
  }

  /** Starts compressing the filled frame; waits only when IN_FLIGHT frames are compressing. */
  private async flush(): Promise<void> {
    if (this.fill === 0) return;
    const ulen = this.fill;
    this.inFlight.push({ ulen, out: compress(this.buf.subarray(0, ulen)), buf: this.buf });
    this.buf = this.spare.pop() ?? new Uint8Array(FRAME_SIZE);
    this.fill = 0;
    while (this.inFlight.length >= IN_FLIGHT) await this.writeOldest();
  }

  /** Frames are written in order, as their compression finishes. */
  private async writeOldest(): Promise<void> {
    const f = this.inFlight.shift()!;
    const out = await f.out;
    this.spare.push(f.buf);
    this.frames.push({ uoff: this.uoff, coff: this.coff, clen: out.length, ulen: f.ulen });
    this.uoff += f.ulen;
    this.coff += out.length;
    await this.sink.write(out);
  }

  /** Gives up: the side copy's file is abandoned (the caller deletes it). */
  async abort(reason: unknown): Promise<void> {
    await Promise.allSettled(this.inFlight.map((f) => f.out));
    this.inFlight.length = 0;
    await this.sink.abort(reason).catch(() => {});
  }

  async finish(): Promise<Frame[]> {
    await this.flush();
    while (this.inFlight.length) await this.writeOldest();
    await this.sink.close();
    return this.frames;
  }
}

export function encodeFrames(frames: Frame[]): Uint8Array {
  const out = new Uint8Array(4 + frames.length * 24);
  const dv = new DataView(out.buffer);
  dv.setUint32(0, frames.length, true);
  frames.forEach((f, i) => {
    const at = 4 + i * 24;
    dv.setFloat64(at, f.uoff, true);
    dv.setFloat64(at + 8, f.coff, true);
    dv.setUint32(at + 16, f.clen, true);
    dv.setUint32(at + 20, f.ulen, true);
  });
  return out;
}

/** The frame table encodeFrames wrote; one cut short throws a RangeError. */
export function decodeFrames(bytes: Uint8Array): Frame[] {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const n = bytes.length < 4 ? -1 : dv.getUint32(0, true);
  if (n < 0 || bytes.length < 4 + n * 24) {
    throw new RangeError(`frame table of ${bytes.length} bytes is cut short`);
  }
  const out: Frame[] = [];
  for (let i = 0; i < n; i++) {
    const at = 4 + i * 24;
    out.push({
      uoff: dv.getFloat64(at, true),
      coff: dv.getFloat64(at + 8, true),
      clen: dv.getUint32(at + 16, true),
      ulen: dv.getUint32(at + 20, true),
    });
  }
  return out;
}

/** Index of the frame holding `uoff` (frames are in order, contiguous). */
export function frameAt(frames: Frame[], uoff: number): number {
  let lo = 0;
  let hi = frames.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1;
    if (frames[mid].uoff <= uoff) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/**
 * One frame of the side copy. Synchronous (a frame is at most 1 MiB: about a millisecond):
 * Deno's callback form, given a corrupt frame, sometimes also threw "Data corruption detected"
 * outside the callback, an uncaught error that would end the process (fuzzing found it).
 */
export const decompressFrame = (b: Uint8Array): Promise<Uint8Array> => {
  try {
    return Promise.resolve(zlib.zstdDecompressSync(b) as Uint8Array);
  } catch (e) {
    return Promise.reject(e);
  }
};
