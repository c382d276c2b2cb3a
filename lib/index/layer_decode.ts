// The walk's first stages: what a layer is, told from its first KiB (gzip, zstd, a plain tar or
// none of these), and its tar stream: decoded, its random-access tables written beside it as the
// bytes pass (gzip checkpoints and windows, zstd frames), and counted against the size and
// expansion limits.
import zlib from "node:zlib";
import { type IndexConfig, UNCOMPRESSED_RATIO_FLOOR } from "../config/mod.ts";
import { BudgetExceededError } from "../sandbox/mod.ts";
import { Scavenger } from "../streams/mod.ts";
import { encodeTable } from "./checkpoint_table.ts";
import { pipeNode } from "./stream_pipes.ts";
import { encodeFrames, FrameWriter } from "./zstd_frames.ts";
import { sealTable } from "./table_seal.ts";
import { nativeZstdAvailable } from "./native_zstd.ts";
import { type Compression, files, readAllStream } from "./layer_store.ts";
import {
  type CheckpointsResult,
  feedCheckpoints,
  inflateInWorker,
  PIECE,
} from "./checkpoint_feed.ts";
import { IndexError } from "./walk_errors.ts";
import type { BlobStore } from "../storage/mod.ts";

/** What the walk reads and writes: the layer's bytes and the derived files of one run. */
export type WalkStore = Pick<BlobStore, "read" | "writeDerived" | "deleteDerived">;

/**
 * Which gzip decoder feeds the walk. "native": the checkpoint worker's own inflate (system zlib
 * through FFI) is the walk's input, so a gzip layer is inflated once, off the main thread, which
 * then only walks and hashes (the web inflate plus pako's second inflate made the pass 0.5× of
 * `tar -tzvf`; see bench/README.md); it reads every member and reports corrupt or truncated
 * data as a partial listing, like node:zlib. Without FFI: the web DecompressionStream inflates
 * ~2× faster than node:zlib here (220 MB of tar: 1.2 s against 2.5 s; `gzip -dc` takes 1.6 s)
 * but refuses a multi-member gzip stream (eStargz layers are one), and a truncated stream ends in
 * an opaque error. So gzip layers go through it first, and any decoding failure re-runs the pass
 * with node:zlib, which reads every member and names what went wrong. The zstd decoder follows
 * the same choice: libzstd in the worker with "native", node:zlib otherwise.
 */
export type Inflater = "native" | "web" | "node";

/** Passes `s` on in chunks of at most `max` bytes (views, no copies). */
export function rechunk(s: ReadableStream<Uint8Array>, max: number): ReadableStream<Uint8Array> {
  return s.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>(
      {
        transform(chunk, c) {
          for (let i = 0; i < chunk.length; i += max) c.enqueue(chunk.subarray(i, i + max));
        },
      },
      { highWaterMark: 1 },
      { highWaterMark: 0 },
    ),
  );
}

export function detectCompression(head: Uint8Array): Compression | "not-tar" {
  if (head[0] === 0x1f && head[1] === 0x8b) return "gzip";
  if (head[0] === 0x28 && head[1] === 0xb5 && head[2] === 0x2f && head[3] === 0xfd) return "zstd";
  return looksLikeTar(head) ? "none" : "not-tar";
}

/** A ustar magic, or an old-style header whose checksum adds up. */
export function looksLikeTar(h: Uint8Array): boolean {
  if (h.length < 512) return h.length === 0 ? false : h.every((b) => b === 0);
  const magic = new TextDecoder().decode(h.subarray(257, 262));
  if (magic === "ustar") return true;
  const stored = parseInt(
    new TextDecoder().decode(h.subarray(148, 156)).replace(/\0.*$/, "").trim(),
    8,
  );
  if (!Number.isFinite(stored)) return false;
  let sum = 0;
  for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 32 : h[i];
  return sum === stored;
}

export interface OpenLayerOptions {
  limits: IndexConfig;
  store: Pick<BlobStore, "read">;
  digest: string;
  size: number;
}

/** The layer's encoding, or why it is refused before a byte is decoded. */
export type OpenedLayer = { compression: Compression } | { refused: string };

/** Stage 1: too large, or not a tar in any of the three encodings, ends the walk here. */
export async function openLayer(o: OpenLayerOptions): Promise<OpenedLayer> {
  if (o.size > o.limits.maxLayerSize) {
    return { refused: `layer of ${o.size} bytes exceeds max_layer_size` };
  }
  const head = o.size === 0 ? new Uint8Array(0) : await readAllStream(
    await o.store.read(o.digest, { start: 0, end: Math.min(o.size, 1024) - 1 }),
  );
  const compression = detectCompression(head);
  return compression === "not-tar" ? { refused: "not a tar archive" } : { compression };
}

export interface DecodeLayerOptions {
  store: WalkStore;
  digest: string;
  /** the run's slot, where the random-access tables go */
  base: string;
  compression: Compression;
  inflater: Inflater;
}

/** A layer's tar stream and the random-access tables written beside it. */
export interface DecodedLayer {
  tar: ReadableStream<Uint8Array>;
  /** ends the decoder where it is: the walk needs no more (the tables so far cover it) */
  stop(): void;
  /**
   * Stage 4, once the walk ended: writes the tables' last files. Returns the decoder's error
   * when it made no gzip checkpoint at all (else null).
   */
  finish(): Promise<string | null>;
  /** The run is dropped: the tables' writes end without a file being finished. */
  discard(e: unknown): Promise<void>;
}

/** Stage 2: the decoder the encoding and `inflater` call for, tables written as bytes pass. */
export async function decodeLayer(o: DecodeLayerOptions): Promise<DecodedLayer> {
  // Big store chunks (the ring reader's are 4 MiB) are cut down: every stage after holds or
  // produces about one chunk at a time, so this bounds what is live (a decoder turns one input
  // chunk into one output chunk ~2.5× its size). node:zlib's zstd pays per call, so it gets
  // 1 MiB (220 MB of tar: 0.59 s to decode against 1.04 s in 256 KiB calls).
  const src = rechunk(
    await o.store.read(o.digest),
    o.compression === "zstd" ? 1024 * 1024 : PIECE,
  );
  if (o.compression === "gzip") return decodeGzip(o, src);
  if (o.compression === "zstd") return decodeZstd(o, src);
  return {
    tar: src,
    stop() {},
    finish: () => Promise.resolve(null),
    discard: () => Promise.resolve(),
  };
}

function decodeGzip(o: DecodeLayerOptions, src: ReadableStream<Uint8Array>): DecodedLayer {
  // Windows are written as they come (in order: one worker, one message queue), not held.
  const windows = new TransformStream<Uint8Array, Uint8Array>();
  const windowsDone = o.store.writeDerived(files.windows(o.base), windows.readable);
  windowsDone.catch(() => {});
  const ww = windows.writable.getWriter();
  const onWindow = (w: Uint8Array) => void ww.write(w).catch(() => {});
  const fed: { stream: ReadableStream<Uint8Array>; result: Promise<CheckpointsResult> } & {
    stop?: () => void;
  } = o.inflater === "native" ? inflateInWorker(src, onWindow) : feedCheckpoints(src, onWindow);
  const checkpointsDone = fed.result;
  const tar = o.inflater === "native" ? fed.stream : o.inflater === "web"
    // 16 KiB in per call: deflate expands at most ~1032×, so no output chunk passes ~16 MiB
    // even for a bomb (and small calls measured faster: 220 MB in 0.63 s vs 1.33 s at 256 KiB).
    ? rechunk(fed.stream, 16 * 1024).pipeThrough(
      new DecompressionStream("gzip") as unknown as TransformStream<Uint8Array, Uint8Array>,
    )
    : pipeNode(fed.stream, zlib.createGunzip({ chunkSize: 256 * 1024 }), 0);
  return {
    tar,
    stop: () => fed.stop?.(),
    async finish() {
      const cps = await checkpointsDone;
      await ww.close();
      await windowsDone;
      const bytes = sealTable(encodeTable(cps.checkpoints, cps.lengths));
      await o.store.writeDerived(files.checkpoints(o.base), ReadableStream.from([bytes]));
      return cps.error && cps.checkpoints.length === 0 ? cps.error : null;
    },
    async discard(e) {
      await checkpointsDone.catch(() => {});
      await ww.abort(e).catch(() => {});
      await windowsDone.catch(() => {});
    },
  };
}

function decodeZstd(o: DecodeLayerOptions, src: ReadableStream<Uint8Array>): DecodedLayer {
  const side = new TransformStream<Uint8Array, Uint8Array>();
  const framesDone = o.store.writeDerived(files.frames(o.base), side.readable);
  const frames = new FrameWriter(side.writable.getWriter());
  // libzstd in a worker where FFI allows (the main thread then only walks and hashes), else
  // node:zlib, whose zstd decodes synchronously on this thread.
  let decoded: ReadableStream<Uint8Array>;
  let stop: (() => void) | undefined;
  if (o.inflater !== "node" && nativeZstdAvailable()) {
    const dec = inflateInWorker(src, () => {}, "zstd");
    stop = dec.stop;
    decoded = dec.stream;
  } else {
    decoded = pipeNode(src, zlib.createZstdDecompress({ chunkSize: 256 * 1024 }), 0);
  }
  const tar = decoded.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      async transform(chunk, c) {
        await frames.push(chunk);
        c.enqueue(chunk);
      },
    }),
  );
  return {
    tar,
    stop: () => stop?.(),
    async finish() {
      const table = await frames.finish();
      await framesDone;
      await o.store.writeDerived(
        files.frameTable(o.base),
        ReadableStream.from([sealTable(encodeFrames(table))]),
      );
      return null;
    },
    async discard(e) {
      await frames.abort(e);
      await framesDone.catch(() => {});
    },
  };
}

export interface CountOptions {
  tar: ReadableStream<Uint8Array>;
  limits: IndexConfig;
  /** the layer's (compressed) size */
  size: number;
  compression: Compression;
}

/** The tar stream counted, and the bytes it has passed so far (capped at the limit). */
export interface CountedTar {
  tar: ReadableStream<Uint8Array>;
  total(): number;
}

/**
 * Stage 2's last step: the decoded bytes counted against max_uncompressed_size and
 * max_uncompressed_ratio.
 */
export function countUncompressed(o: CountOptions): CountedTar {
  const { limits, size } = o;
  let total = 0;
  // Past the limit, what came before it is still walked (and listed); the next chunk or the
  // end of the stream then ends the walk.
  const overLimitError = () =>
    new IndexError(
      `uncompressed data exceeds max_uncompressed_size (${limits.maxUncompressedSize} bytes)`,
      true,
    );
  let over = false;
  // A compressed layer may expand by max_uncompressed_ratio (once past the floor, where
  // ordinary layers of zeros live): a bomb trips this long before max_uncompressed_size.
  const ratioLimit = o.compression === "none"
    ? Infinity
    : Math.max(UNCOMPRESSED_RATIO_FLOOR, limits.maxUncompressedRatio * size);
  const scavenger = new Scavenger();
  const tar = o.tar.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, c) {
        if (over) throw overLimitError();
        const room = limits.maxUncompressedSize - total;
        total += chunk.length;
        if (total > ratioLimit && ratioLimit < limits.maxUncompressedSize) {
          throw new BudgetExceededError(
            "max_uncompressed_ratio",
            limits.maxUncompressedRatio,
            `${Math.floor(total / Math.max(1, size))}:1 (${total} bytes from ${size})`,
          );
        }
        scavenger.passed(chunk.length);
        if (chunk.length > room) {
          over = true;
          total = limits.maxUncompressedSize;
          if (room > 0) c.enqueue(chunk.subarray(0, room));
          return;
        }
        c.enqueue(chunk);
      },
      flush() {
        if (over) throw overLimitError();
      },
    }),
  );
  return { tar, total: () => total };
}
