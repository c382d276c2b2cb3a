// The index job (issue: layer index): streams a layer blob once — decompress (gzip, zstd or
// none, told from the bytes), walk the tar, hash every regular file (sha256 + sha512), classify
// it, scan text files for secrets — and writes the listing, the random-access data and a small
// KV pointer. Memory stays flat: entries go to the listing file as they are read, file data is
// hashed chunk by chunk, gzip checkpoints are computed by a worker fed with flow control.
import { ListingWriter } from "./listing_document.ts";
import { createHash } from "node:crypto";
import zlib from "node:zlib";
import { type Config, type IndexConfig, UNCOMPRESSED_RATIO_FLOOR } from "../config/mod.ts";
import { BudgetExceededError } from "../sandbox/mod.ts";
import type { BlobStore } from "../storage/mod.ts";
import { Scavenger } from "../streams/mod.ts";
import { type Checkpoint, CheckpointBuilder, encodeTable, pipeNode } from "./gzip_checkpoints.ts";
import { encodeFrames, FrameWriter } from "./zstd_frames.ts";
import { nativeZlibAvailable } from "./native_checkpoints.ts";
import { nativeZstdAvailable } from "./native_zstd.ts";
import { libraryPaths } from "./native_libs.ts";
import { utf8Length } from "./utf8.ts";
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
/** Listing text gathered before one write (characters, ~bytes). */
const LISTING_BATCH = 64 * 1024;
const PIECE = 256 * 1024;
/** Chunks the checkpoint worker may hold; each travels in a pooled buffer and comes back. */
const WORKER_IN_FLIGHT = 8;
/** Output buffers (256 KiB) the inflating worker may have sent that the walk has not taken. */
const WORKER_OUTPUT_CREDITS = 8;

const MAX_RECORD_ERROR = 2000;

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
  /** the budget the walk passed (its record is `unsupported`) */
  budget?: BudgetExceededError;
  /** why the walk could not end at all (a budget, a dead sandbox): the job fails at once */
  failure?: Error;
}

/**
 * The final record of a layer that has no listing, and why. `failure` (a budget passed, a dead
 * sandbox) also fails the job at once; a budget is kept as such for the caller to name.
 */
export function unsupportedResult(
  base: string,
  error: string,
  compression: Compression | null,
  failure?: Error,
): IndexResult {
  return {
    record: {
      version: INDEX_VERSION,
      state: "unsupported",
      compression,
      uncompressedSize: 0,
      entries: 0,
      error,
      indexedAt: Date.now(),
      base,
    },
    error,
    ...(failure ? { failure } : {}),
    ...(failure instanceof BudgetExceededError ? { budget: failure } : {}),
  };
}

/** What the walk reads and writes: the layer's bytes and the derived files of one run. */
export type WalkStore = Pick<BlobStore, "read" | "writeDerived" | "deleteDerived">;

/**
 * Indexes `digest` (size `size`) here, in this process, and commits its pointer; the caller
 * handles the outcome. A layer that is not a tar, or too large, gets an `unsupported` record
 * (final). The serving process runs the same walk in a sandbox instead (LayerIndex.run).
 */
export async function indexLayer(
  cfg: Config,
  kv: Deno.Kv,
  store: BlobStore,
  digest: string,
  size: number,
  signal?: AbortSignal,
  /** tests: the gzip decoder to start with (default: native where available, else web) */
  inflater?: Inflater,
): Promise<IndexResult> {
  const current = await kv.get<IndexRecord>(indexKey(digest));
  const base = runBase(digest, current.value?.base);
  const r = await walkLayer(cfg.global.index, store, digest, size, base, signal, inflater);
  return await commitIndexRecord(kv, store, digest, r);
}

/** Points the layer at a finished run's record and clears the other slot. */
export async function commitIndexRecord(
  kv: Deno.Kv,
  store: Pick<BlobStore, "deleteDerived">,
  digest: string,
  r: IndexResult,
): Promise<IndexResult> {
  // An error may quote the layer (a PAX key, a name): the record stays a small KV value.
  const e = r.record.error;
  if (e !== undefined && e.length > MAX_RECORD_ERROR) {
    r.record.error = `${e.slice(0, MAX_RECORD_ERROR)}…`;
  }
  const old = await kv.get<IndexRecord>(indexKey(digest));
  await kv.set(indexKey(digest), r.record);
  if (old.value?.base && old.value.base !== r.record.base) {
    await store.deleteDerived(old.value.base).catch(() => {});
  }
  return r;
}

/**
 * The walk alone: writes the run's derived files under `base` and returns its record, touching
 * no metadata (a sandboxed walk has none to touch). A budget passed ends it with an
 * `unsupported` record that names the budget, and nothing of the run left behind.
 */
export async function walkLayer(
  limits: IndexConfig,
  store: WalkStore,
  digest: string,
  size: number,
  base: string,
  signal?: AbortSignal,
  inflater?: Inflater,
  /** false when the layer's bytes can be read only once (a sandbox fed on its input) */
  rereadable = true,
): Promise<IndexResult> {
  const first = inflater ?? (nativeZlibAvailable() ? "native" : rereadable ? "web" : "node");
  const fast = await walkOnce(limits, store, digest, size, base, signal, first);
  if (fast) return fast;
  if (!rereadable) throw new IndexError(`the ${first} decoder failed`, false);
  return (await walkOnce(limits, store, digest, size, base, signal, "node"))!;
}

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

async function walkOnce(
  limits: IndexConfig,
  store: WalkStore,
  digest: string,
  size: number,
  base: string,
  signal: AbortSignal | undefined,
  inflater: Inflater,
): Promise<IndexResult | null> {
  await store.deleteDerived(base);
  const unsupported = (error: string, compression: Compression | null, failure?: Error) =>
    unsupportedResult(base, error, compression, failure);
  if (size > limits.maxLayerSize) {
    return unsupported(`layer of ${size} bytes exceeds max_layer_size`, null);
  }
  const head = size === 0
    ? new Uint8Array(0)
    : await readAllStream(await store.read(digest, { start: 0, end: Math.min(size, 1024) - 1 }));
  let compression = detectCompression(head);
  if (compression === "not-tar") return unsupported("not a tar archive", null);

  // Listing: NDJSON and the endpoint's document, written while the walk goes on.
  const listingWriter = new ListingWriter(store, base);
  // Lines go out in batches: awaiting one file write per entry stalled the walk (and with it the
  // decoder worker) on every entry of a many-file layer (21k entries: both threads ~55% idle).
  let listed: string[] = [];
  let listedChars = 0;
  const flushListing = async () => {
    if (listed.length === 0) return;
    const batch = listed;
    listed = [];
    listedChars = 0;
    await listingWriter.write(batch);
  };

  let checkpointsDone: Promise<CheckpointsResult> | null = null;
  let stopInflate: (() => void) | undefined;
  let windowsDone: Promise<number> | null = null;
  let windowsWriter: WritableStreamDefaultWriter<Uint8Array> | null = null;
  let frames: FrameWriter | null = null;
  let framesDone: Promise<number> | null = null;
  // Big store chunks (the ring reader's are 4 MiB) are cut down: every stage after holds or
  // produces about one chunk at a time, so this bounds what is live (a decoder turns one input
  // chunk into one output chunk ~2.5× its size). node:zlib's zstd pays per call, so it gets
  // 1 MiB (220 MB of tar: 0.59 s to decode against 1.04 s in 256 KiB calls).
  let src = rechunk(await store.read(digest), compression === "zstd" ? 1024 * 1024 : PIECE);
  let uncompressed: ReadableStream<Uint8Array>;
  if (compression === "gzip") {
    // Windows are written as they come (in order: one worker, one message queue), not held.
    const windows = new TransformStream<Uint8Array, Uint8Array>();
    windowsDone = store.writeDerived(files.windows(base), windows.readable);
    windowsDone.catch(() => {});
    const ww = windows.writable.getWriter();
    windowsWriter = ww;
    const onWindow = (w: Uint8Array) => void ww.write(w).catch(() => {});
    const fed: { stream: ReadableStream<Uint8Array>; result: Promise<CheckpointsResult> } & {
      stop?: () => void;
    } = inflater === "native" ? inflateInWorker(src, onWindow) : feedCheckpoints(src, onWindow);
    checkpointsDone = fed.result;
    stopInflate = fed.stop;
    uncompressed = inflater === "native" ? fed.stream : inflater === "web"
      // 16 KiB in per call: deflate expands at most ~1032×, so no output chunk passes ~16 MiB
      // even for a bomb (and small calls measured faster: 220 MB in 0.63 s vs 1.33 s at 256 KiB).
      ? rechunk(fed.stream, 16 * 1024).pipeThrough(
        new DecompressionStream("gzip") as unknown as TransformStream<Uint8Array, Uint8Array>,
      )
      : pipeNode(fed.stream, zlib.createGunzip({ chunkSize: 256 * 1024 }), 0);
  } else if (compression === "zstd") {
    const side = new TransformStream<Uint8Array, Uint8Array>();
    framesDone = store.writeDerived(files.frames(base), side.readable);
    frames = new FrameWriter(side.writable.getWriter());
    const fw = frames;
    // libzstd in a worker where FFI allows (the main thread then only walks and hashes), else
    // node:zlib, whose zstd decodes synchronously on this thread.
    let decoded: ReadableStream<Uint8Array>;
    if (inflater !== "node" && nativeZstdAvailable()) {
      const dec = inflateInWorker(src, () => {}, "zstd");
      stopInflate = dec.stop;
      decoded = dec.stream;
    } else {
      decoded = pipeNode(src, zlib.createZstdDecompress({ chunkSize: 256 * 1024 }), 0);
    }
    uncompressed = decoded
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
  const ratioLimit = compression === "none"
    ? Infinity
    : Math.max(UNCOMPRESSED_RATIO_FLOOR, limits.maxUncompressedRatio * size);
  const scavenger = new Scavenger();
  const counted = uncompressed.pipeThrough(
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
      s.scanner = new SecretScanner(e.path, { maxBytes: limits.maxSecretScanBytes });
      s.scanner.push(s.head);
    }
  };

  let entries = 0;
  let walkError: string | null = null;
  let overLimit = false;
  try {
    for await (const e of walkTar(counted, { onData, maxEntries: limits.maxEntries })) {
      signal?.throwIfAborted();
      const max = limits.maxPathBytes;
      for (const [what, name] of [["path", e.path], ["link target", e.linkTarget]] as const) {
        if (name !== undefined && utf8Length(name, max) > max) {
          throw new BudgetExceededError(
            "max_path_bytes",
            max,
            `a ${what} of ${utf8Length(name)} bytes`,
          );
        }
      }
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
      listed.push(JSON.stringify(out));
      listedChars += listed[listed.length - 1].length;
      if (listedChars >= LISTING_BATCH) await flushListing();
    }
  } catch (e) {
    if (e instanceof DOMException && e.name === "AbortError") {
      await listingWriter.abort(e);
      throw e;
    }
    // Drops everything the run wrote so far.
    const discard = async () => {
      await listingWriter.abort(e);
      await checkpointsDone?.catch(() => {});
      await windowsWriter?.abort(e).catch(() => {});
      await windowsDone?.catch(() => {});
      await frames?.abort(e);
      await framesDone?.catch(() => {});
      await store.deleteDerived(base).catch(() => {});
    };
    if (e instanceof BudgetExceededError) {
      // Nothing of a run that passed a budget stays: no listing is served as if it were whole.
      stopInflate?.();
      await discard();
      return unsupported(e.message, compression, e);
    }
    if (
      inflater !== "node" && compression !== "none" && !(e instanceof IndexError) &&
      !(e instanceof TarError) && !(e instanceof CompressedDataError) &&
      // node:zlib's zstd errors name the data's fault: re-running cannot do better
      !(compression === "zstd" && isDecodeError(e))
    ) {
      await discard();
      return null;
    }
    if (e instanceof IndexError || e instanceof TarError || isDecodeError(e)) {
      walkError = e instanceof Error ? e.message : String(e);
      overLimit = e instanceof IndexError;
    } else {
      await listingWriter.abort(e);
      throw e;
    }
  }
  if (entries === 0 && walkError !== null) {
    await listingWriter.abort(new Error(walkError));
    await store.deleteDerived(base).catch(() => {});
    // Nothing readable at all: a compressed blob that is no tar, or garbage.
    if (compression !== "none") compression = compression ?? null;
    return unsupported(
      overLimit ? walkError : `not a tar archive (${walkError})`,
      compression,
    );
  }
  await flushListing();
  // The walk stops at the end-of-archive blocks without reading on: the decoder worker would
  // wait for it to take what follows (padding, or anything after the archive) forever.
  stopInflate?.();
  if (checkpointsDone) {
    const cps = await checkpointsDone;
    await windowsWriter!.close();
    await windowsDone;
    const bytes = encodeTable(cps.checkpoints, cps.lengths);
    await store.writeDerived(files.checkpoints(base), ReadableStream.from([bytes]));
    if (cps.error && walkError === null && cps.checkpoints.length === 0) walkError = cps.error;
  }
  if (frames) {
    const table = await frames.finish();
    await framesDone;
    await store.writeDerived(files.frameTable(base), ReadableStream.from([encodeFrames(table)]));
  }
  const outcome = walkError === null ? "ready" : "partial";
  const error = walkError === null ? {} : { error: walkError };
  const documentSize = await listingWriter.close({
    compression,
    uncompressedSize: total,
    state: outcome,
    ...error,
  });
  return {
    record: {
      version: INDEX_VERSION,
      state: outcome,
      compression,
      uncompressedSize: total,
      entries,
      ...error,
      indexedAt: Date.now(),
      documentSize,
      base,
    },
    error: walkError ?? undefined,
  };
}

/** Corrupt or truncated gzip or zstd data, as the native decoders report it. */
class CompressedDataError extends Error {
  readonly code = "Z_DATA_ERROR";
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
interface CheckpointsResult {
  /** table entries (windows empty: they went to `onWindow`) */
  checkpoints: Checkpoint[];
  lengths: number[];
  error: string | null;
}

function newCheckpointWorker(): Worker | null {
  try {
    return new Worker(new URL("./checkpoint_worker.ts", import.meta.url).href, {
      type: "module",
    });
  } catch {
    return null; // no workers (a restricted runtime)
  }
}

/**
 * Inflates the compressed stream in the checkpoint worker (native zlib), which also makes the
 * checkpoints; the result is the uncompressed stream. At most WORKER_IN_FLIGHT compressed chunks
 * and WORKER_OUTPUT_CREDITS output chunks are in flight, so memory stays bounded however much
 * the data expands. When the walk stops early (a limit, an error, the end-of-archive blocks),
 * the worker stops and the checkpoints made so far are the result.
 */
function inflateInWorker(
  src: ReadableStream<Uint8Array>,
  onWindow: (w: Uint8Array) => void,
  codec: "gzip" | "zstd" = "gzip",
): {
  stream: ReadableStream<Uint8Array>;
  result: Promise<CheckpointsResult>;
  /** ends the pass where it is (the walk needs no more: the checkpoints so far cover it) */
  stop?: () => void;
} {
  const w = newCheckpointWorker();
  if (!w) {
    const stream = new ReadableStream<Uint8Array>({
      start: (c) => c.error(new Error("no worker for the native inflate")),
    });
    const result = Promise.reject(new Error("no worker"));
    result.catch(() => {});
    return { stream, result };
  }
  w.postMessage({
    init: {
      inflate: true,
      credits: WORKER_OUTPUT_CREDITS,
      zstd: codec === "zstd",
      libs: libraryPaths(),
    },
  });
  const pool: ArrayBuffer[] = [];
  const output: Uint8Array[] = [];
  let inFlight = 0;
  let finished: CheckpointsResult & { complete: boolean } | null = null;
  let failure: Error | null = null;
  // The feeding loop and the stream's pull may both be waiting.
  let waiters: (() => void)[] = [];
  const notify = () => {
    const all = waiters;
    waiters = [];
    for (const f of all) f();
  };
  const changed = () => new Promise<void>((r) => waiters.push(r));
  let resolveResult!: (v: CheckpointsResult) => void;
  let rejectResult!: (e: Error) => void;
  const result = new Promise<CheckpointsResult>((res, rej) => {
    resolveResult = res;
    rejectResult = rej;
  });
  result.catch(() => {});
  w.onmessage = (e) => {
    const m = e.data;
    if (m?.output) {
      output.push(new Uint8Array(m.output, 0, m.length));
    } else if (m?.ack) {
      inFlight--;
      if (m.buffer instanceof ArrayBuffer) pool.push(m.buffer);
    } else if (m?.checkpoint) {
      onWindow(new Uint8Array(m.window));
    } else if (m?.done) {
      finished = m;
      resolveResult({ checkpoints: m.checkpoints, lengths: m.lengths, error: m.error });
      w.terminate();
    }
    notify();
  };
  w.onerror = (e) => {
    e.preventDefault();
    failure = new Error(`checkpoint worker: ${e.message}`);
    rejectResult(failure);
    w.terminate();
    notify();
  };
  const reader = src.getReader();
  let stopped = false;
  // Feeds the worker as fast as it takes chunks; the output credits hold both sides back.
  (async () => {
    try {
      for (;;) {
        while (inFlight >= WORKER_IN_FLIGHT && !stopped && !failure && !finished) {
          await changed();
        }
        if (stopped || failure || finished) return;
        const { value, done } = await reader.read();
        if (stopped || failure || finished) return;
        if (done) {
          w.postMessage(null);
          return;
        }
        // The store may reuse a chunk's memory: the worker gets its own copy.
        for (let at = 0; at < value.length; at += PIECE) {
          const part = value.subarray(at, at + PIECE);
          const buf = pool.pop() ?? new ArrayBuffer(PIECE);
          new Uint8Array(buf).set(part);
          inFlight++;
          w.postMessage({ buffer: buf, length: part.length }, [buf]);
        }
      }
    } catch (e) {
      failure = e instanceof Error ? e : new Error(String(e));
      notify();
    }
  })();
  const stop = () => {
    if (stopped) return;
    stopped = true;
    if (!finished && !failure) w.postMessage({ stop: true });
    reader.cancel().catch(() => {});
    notify();
  };
  const stream = new ReadableStream<Uint8Array>({
    async pull(c) {
      for (;;) {
        const chunk = output.shift();
        if (chunk) {
          if (!finished) w.postMessage({ credit: 1 });
          c.enqueue(chunk);
          return;
        }
        if (failure) {
          stop();
          return c.error(failure);
        }
        if (finished) {
          reader.cancel().catch(() => {});
          if (finished.complete) return c.close();
          return c.error(new CompressedDataError(finished.error ?? `${codec} stream truncated`));
        }
        await changed();
      }
    },
    cancel() {
      stop();
    },
  }, { highWaterMark: 0 });
  return { stream, result, stop };
}

function feedCheckpoints(
  src: ReadableStream<Uint8Array>,
  onWindow: (w: Uint8Array) => void,
): {
  stream: ReadableStream<Uint8Array>;
  result: Promise<CheckpointsResult>;
} {
  const worker = newCheckpointWorker();
  if (!worker) {
    const b = new CheckpointBuilder(undefined, (c) => onWindow(c.window));
    const stream = src.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, c) {
          b.push(chunk);
          c.enqueue(chunk);
        },
      }),
    );
    return {
      stream,
      result: Promise.resolve().then(() => ({ ...b.finish(), lengths: b.lengths })),
    };
  }
  const w = worker;
  w.postMessage({ init: { inflate: false, libs: libraryPaths() } });
  // Transfer buffers go to the worker and come back with its acknowledgement, so neither side
  // allocates per chunk (fresh ArrayBuffers are freed only under external-memory pressure,
  // which is RSS).
  const pool: ArrayBuffer[] = [];
  let inFlight = 0;
  let acked: (() => void) | null = null;
  let resolveResult!: (v: CheckpointsResult) => void;
  let rejectResult!: (e: Error) => void;
  const result = new Promise<CheckpointsResult>((res, rej) => {
    resolveResult = res;
    rejectResult = rej;
  });
  result.catch(() => {});
  w.onmessage = (e) => {
    if (e.data?.ack) {
      inFlight--;
      if (e.data.buffer instanceof ArrayBuffer) pool.push(e.data.buffer);
      acked?.();
    } else if (e.data?.checkpoint) {
      onWindow(new Uint8Array(e.data.window));
    } else if (e.data?.done) {
      resolveResult({
        checkpoints: e.data.checkpoints,
        lengths: e.data.lengths,
        error: e.data.error,
      });
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
      const buf = pool.pop() ?? new ArrayBuffer(PIECE);
      const n = Math.min(value.length, buf.byteLength);
      new Uint8Array(buf).set(value.subarray(0, n));
      inFlight++;
      w.postMessage({ buffer: buf, length: n }, [buf]);
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
