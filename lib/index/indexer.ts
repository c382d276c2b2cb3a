// The index job (issue: layer index): streams a layer blob once — decompress (gzip, zstd or
// none, told from the bytes), walk the tar, hash every regular file (sha256 + sha512), classify
// it, scan text files for secrets — and writes the listing, the random-access data and a small
// KV pointer. Memory stays flat: entries go to the listing file as they are read, file data is
// hashed chunk by chunk, gzip checkpoints are computed by a worker fed with flow control.
import { createHash } from "node:crypto";
import zlib from "node:zlib";
import type { Config } from "../config/mod.ts";
import type { BlobStore } from "../storage/mod.ts";
import {
  type Checkpoint,
  CheckpointBuilder,
  encodeCheckpoints,
  pipeNode,
} from "./gzip_checkpoints.ts";
import { encodeFrames, FrameWriter } from "./zstd_frames.ts";
import {
  type Compression,
  files,
  INDEX_VERSION,
  indexKey,
  type IndexRecord,
  type ListedEntry,
  readAllStream,
  runBase,
} from "./layer_store.ts";
import { type TarEntry, TarError, walkTar } from "./tar.ts";
import { isText, mimeType } from "./mime.ts";
import { SecretScanner } from "./secrets.ts";

const HEAD = 8 * 1024;
const WORKER_IN_FLIGHT = 8;

export class IndexError extends Error {
  constructor(message: string, readonly permanent: boolean) {
    super(message);
  }
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

interface FileState {
  sha256: ReturnType<typeof createHash>;
  sha512: ReturnType<typeof createHash>;
  head: Uint8Array;
  headFill: number;
  scanner: SecretScanner | null;
  /** text-ness decided once the head is full (or the file ended) */
  decided: boolean;
}

export interface IndexResult {
  record: IndexRecord;
  /** set for a partial listing: why the walk stopped (the job dead-letters with it) */
  error?: string;
}

/**
 * Indexes `digest` (size `size`) and commits its pointer; the caller handles the outcome.
 * A layer that is not a tar, or too large, gets an `unsupported` record (final).
 */
export async function indexLayer(
  cfg: Config,
  kv: Deno.Kv,
  store: BlobStore,
  digest: string,
  size: number,
  signal?: AbortSignal,
): Promise<IndexResult> {
  const limits = cfg.global.index;
  const base = runBase(digest);
  const finalRecord = async (rec: IndexRecord): Promise<IndexResult> => {
    const old = await kv.get<IndexRecord>(indexKey(digest));
    await kv.set(indexKey(digest), rec);
    if (old.value?.base && old.value.base !== rec.base) {
      await store.deleteDerived(old.value.base).catch(() => {});
    }
    return { record: rec, error: rec.error };
  };
  const unsupported = (error: string, compression: Compression | null) =>
    finalRecord({
      version: INDEX_VERSION,
      state: "unsupported",
      compression,
      uncompressedSize: 0,
      entries: 0,
      error,
      indexedAt: Date.now(),
      base,
    });
  if (size > limits.maxLayerSize) {
    return await unsupported(`layer of ${size} bytes exceeds max_layer_size`, null);
  }
  const head = size === 0
    ? new Uint8Array(0)
    : await readAllStream(await store.read(digest, { start: 0, end: Math.min(size, 1024) - 1 }));
  let compression = detectCompression(head);
  if (compression === "not-tar") return await unsupported("not a tar archive", null);

  // Listing: NDJSON written while the walk goes on.
  const listing = new TransformStream<Uint8Array, Uint8Array>();
  const listingWriter = listing.writable.getWriter();
  const listingDone = store.writeDerived(files.listing(base), listing.readable);
  const enc = new TextEncoder();

  let checkpointsDone: Promise<{ checkpoints: Checkpoint[]; error: string | null }> | null = null;
  let frames: FrameWriter | null = null;
  let framesDone: Promise<number> | null = null;
  let src = await store.read(digest);
  let uncompressed: ReadableStream<Uint8Array>;
  if (compression === "gzip") {
    const fed = feedCheckpoints(src);
    checkpointsDone = fed.result;
    uncompressed = pipeNode(fed.stream, zlib.createGunzip({ chunkSize: 256 * 1024 }), 0);
  } else if (compression === "zstd") {
    const side = new TransformStream<Uint8Array, Uint8Array>();
    framesDone = store.writeDerived(files.frames(base), side.readable);
    frames = new FrameWriter(side.writable.getWriter());
    const fw = frames;
    uncompressed = pipeNode(src, zlib.createZstdDecompress({ chunkSize: 256 * 1024 }), 0)
      .pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          async transform(chunk, c) {
            await fw.push(chunk);
            c.enqueue(chunk);
          },
        }),
      );
  } else {
    uncompressed = src;
  }
  src = null as unknown as ReadableStream<Uint8Array>;

  let total = 0;
  const counted = uncompressed.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, c) {
        total += chunk.length;
        if (total > limits.maxUncompressedSize) {
          throw new IndexError(
            `uncompressed data exceeds max_uncompressed_size (${limits.maxUncompressedSize} bytes)`,
            true,
          );
        }
        c.enqueue(chunk);
      },
    }),
  );

  let state: FileState | null = null;
  const onData = (e: TarEntry, chunk: Uint8Array) => {
    if (!state) {
      state = {
        sha256: createHash("sha256"),
        sha512: createHash("sha512"),
        head: new Uint8Array(Math.min(HEAD, e.size)),
        headFill: 0,
        scanner: null,
        decided: false,
      };
    }
    const s = state;
    s.sha256.update(chunk);
    s.sha512.update(chunk);
    if (!s.decided) {
      const n = Math.min(chunk.length, s.head.length - s.headFill);
      s.head.set(chunk.subarray(0, n), s.headFill);
      s.headFill += n;
      if (s.headFill === s.head.length) decide(e, s);
      if (s.decided && s.scanner) s.scanner.push(chunk.subarray(n));
    } else if (s.scanner) {
      s.scanner.push(chunk);
    }
  };
  const decide = (e: TarEntry, s: FileState) => {
    s.decided = true;
    if (isText(s.head)) {
      s.scanner = new SecretScanner(e.path);
      s.scanner.push(s.head);
    }
  };

  let entries = 0;
  let walkError: string | null = null;
  let overLimit = false;
  try {
    for await (const e of walkTar(counted, { onData, maxEntries: limits.maxEntries })) {
      signal?.throwIfAborted();
      const out: ListedEntry = {
        path: e.path,
        kind: e.kind,
        size: e.size,
        mode: e.mode,
        uid: e.uid,
        gid: e.gid,
        mtime: e.mtime,
        offset: e.offset,
      };
      if (e.linkTarget !== undefined) out.link_target = e.linkTarget;
      if (e.capabilities?.length) out.capabilities = e.capabilities;
      if (e.kind === "file") {
        const s: FileState = state ?? {
          sha256: createHash("sha256"),
          sha512: createHash("sha512"),
          head: new Uint8Array(0),
          headFill: 0,
          scanner: null,
          decided: false,
        };
        if (!s.decided) decide(e, s);
        const secrets = s.scanner?.finish() ?? [];
        out.content = {
          sha256: s.sha256.digest("hex"),
          sha512: s.sha512.digest("hex"),
          mime_type: mimeType(e.path, s.head.subarray(0, s.headFill)),
        };
        if (secrets.length) out.content.secrets = secrets;
      }
      state = null;
      entries++;
      await listingWriter.write(enc.encode(JSON.stringify(out) + "\n"));
    }
  } catch (e) {
    if (e instanceof DOMException && e.name === "AbortError") {
      await listingWriter.abort(e).catch(() => {});
      throw e;
    }
    if (e instanceof IndexError || e instanceof TarError || isDecodeError(e)) {
      walkError = e instanceof Error ? e.message : String(e);
      overLimit = e instanceof IndexError;
    } else {
      await listingWriter.abort(e).catch(() => {});
      throw e;
    }
  }
  if (entries === 0 && walkError !== null) {
    await listingWriter.abort(new Error(walkError)).catch(() => {});
    await listingDone.catch(() => {});
    await store.deleteDerived(base).catch(() => {});
    // Nothing readable at all: a compressed blob that is no tar, or garbage.
    if (compression !== "none") compression = compression ?? null;
    return await unsupported(
      overLimit ? walkError : `not a tar archive (${walkError})`,
      compression,
    );
  }
  await listingWriter.close();
  await listingDone;
  if (checkpointsDone) {
    const cps = await checkpointsDone;
    const bytes = encodeCheckpoints(cps.checkpoints);
    await store.writeDerived(files.checkpoints(base), ReadableStream.from([bytes]));
    if (cps.error && walkError === null && cps.checkpoints.length === 0) walkError = cps.error;
  }
  if (frames) {
    const table = await frames.finish();
    await framesDone;
    await store.writeDerived(files.frameTable(base), ReadableStream.from([encodeFrames(table)]));
  }
  return await finalRecord({
    version: INDEX_VERSION,
    state: walkError === null ? "ready" : "partial",
    compression,
    uncompressedSize: total,
    entries,
    ...(walkError === null ? {} : { error: walkError }),
    indexedAt: Date.now(),
    base,
  });
}

function isDecodeError(e: unknown): boolean {
  // node:zlib reports corrupt or truncated input with a code (Z_DATA_ERROR, Z_BUF_ERROR, ZSTD_…).
  const code = (e as { code?: unknown })?.code;
  return typeof code === "string" && /^(Z_|ZSTD_|ERR_)/.test(code) ||
    (e instanceof Error && /unexpected end|incorrect header|invalid|corrupt/i.test(e.message));
}

/**
 * Passes the compressed stream through while a worker computes the gzip checkpoints from the
 * same bytes; at most WORKER_IN_FLIGHT chunks wait for it, so memory stays bounded.
 */
function feedCheckpoints(src: ReadableStream<Uint8Array>): {
  stream: ReadableStream<Uint8Array>;
  result: Promise<{ checkpoints: Checkpoint[]; error: string | null }>;
} {
  let worker: Worker | null = null;
  try {
    worker = new Worker(new URL("./checkpoint_worker.ts", import.meta.url).href, {
      type: "module",
    });
  } catch {
    worker = null; // no workers (a restricted runtime): compute inline
  }
  if (!worker) {
    const b = new CheckpointBuilder();
    const stream = src.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, c) {
          b.push(chunk);
          c.enqueue(chunk);
        },
      }),
    );
    return { stream, result: Promise.resolve().then(() => b.finish()) };
  }
  const w = worker;
  let inFlight = 0;
  let acked: (() => void) | null = null;
  let resolveResult!: (v: { checkpoints: Checkpoint[]; error: string | null }) => void;
  let rejectResult!: (e: Error) => void;
  const result = new Promise<{ checkpoints: Checkpoint[]; error: string | null }>((res, rej) => {
    resolveResult = res;
    rejectResult = rej;
  });
  result.catch(() => {});
  w.onmessage = (e) => {
    if (e.data?.ack) {
      inFlight--;
      acked?.();
    } else if (e.data?.done) {
      resolveResult({ checkpoints: e.data.checkpoints, error: e.data.error });
      w.terminate();
    }
  };
  w.onerror = (e) => {
    e.preventDefault();
    rejectResult(new Error(`checkpoint worker: ${e.message}`));
    w.terminate();
  };
  const reader = src.getReader();
  const stream = new ReadableStream<Uint8Array>({
    async pull(c) {
      const { value, done } = await reader.read();
      if (done) {
        w.postMessage(null);
        return c.close();
      }
      while (inFlight >= WORKER_IN_FLIGHT) await new Promise<void>((r) => (acked = r));
      // The store may reuse a chunk's memory: the worker gets its own copy.
      const copy = value.slice();
      inFlight++;
      w.postMessage(copy.buffer, [copy.buffer]);
      c.enqueue(value);
    },
    async cancel(reason) {
      w.terminate();
      rejectResult(new Error("cancelled"));
      await reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
  return { stream, result };
}
