// The index job (issue: layer index): streams a layer blob once — decompress (gzip, zstd or
// none, told from the bytes), walk the tar, hash every regular file (sha256 + sha512), classify
// it, scan text files for secrets — and writes the listing, the random-access data and a small
// KV pointer. Memory stays flat: entries go to the listing file as they are read, file data is
// hashed chunk by chunk, gzip checkpoints are computed by a worker fed with flow control.
//
// One pass runs in stages, each in its own module: open (layer_decode.ts: the encoding, from the
// head) → decode and count (layer_decode.ts, checkpoint_feed.ts) → read entries
// (read_entries.ts) → finish the tables and the listing (here) → commit the record (here).
import { ListingWriter } from "./listing_document.ts";
import type { Config, IndexConfig } from "../config/mod.ts";
import { BudgetExceededError } from "../sandbox/mod.ts";
import type { BlobStore } from "../storage/mod.ts";
import { nativeZlibAvailable } from "./native_checkpoints.ts";
import { type Compression, INDEX_VERSION, type IndexRecord, runBase } from "./layer_store.ts";
import type { IndexRecords } from "./index_records.ts";
import { TarError } from "./tar.ts";
import {
  countUncompressed,
  type DecodedLayer,
  decodeLayer,
  type Inflater,
  openLayer,
  type WalkStore,
} from "./layer_decode.ts";
import { BatchedListing, readEntries } from "./read_entries.ts";
import { CompressedDataError, IndexError, isDecodeError } from "./walk_errors.ts";

export type { Inflater, WalkStore } from "./layer_decode.ts";

const MAX_RECORD_ERROR = 2000;

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

export interface IndexLayerOptions {
  cfg: Config;
  records: Pick<IndexRecords, "get" | "set">;
  store: BlobStore;
  digest: string;
  size: number;
  signal?: AbortSignal;
  /** tests: the gzip decoder to start with (default: native where available, else web) */
  inflater?: Inflater;
}

/**
 * Indexes `digest` (size `size`) here, in this process, and commits its pointer; the caller
 * handles the outcome. A layer that is not a tar, or too large, gets an `unsupported` record
 * (final). The serving process runs the same walk in a sandbox instead (LayerIndex.run).
 */
export async function indexLayer(o: IndexLayerOptions): Promise<IndexResult> {
  const current = await o.records.get(o.digest);
  const base = runBase(o.digest, current?.base);
  const r = await walkLayer({ ...o, limits: o.cfg.global.index, base });
  return await commitIndexRecord({
    records: o.records,
    store: o.store,
    digest: o.digest,
    result: r,
  });
}

export interface CommitIndexOptions {
  records: Pick<IndexRecords, "get" | "set">;
  store: Pick<BlobStore, "deleteDerived">;
  digest: string;
  result: IndexResult;
}

/** Stage 5: points the layer at a finished run's record and clears the other slot. */
export async function commitIndexRecord(o: CommitIndexOptions): Promise<IndexResult> {
  const { records, digest, result: r } = o;
  // An error may quote the layer (a PAX key, a name): the record stays a small KV value.
  const e = r.record.error;
  if (e !== undefined && e.length > MAX_RECORD_ERROR) {
    r.record.error = `${e.slice(0, MAX_RECORD_ERROR)}…`;
  }
  const old = await records.get(digest);
  await records.set(digest, r.record);
  if (old?.base && old.base !== r.record.base) {
    await o.store.deleteDerived(old.base).catch(() => {});
  }
  return r;
}

export interface WalkOptions {
  limits: IndexConfig;
  store: WalkStore;
  digest: string;
  size: number;
  /** the run's slot for its derived files */
  base: string;
  signal?: AbortSignal;
  /** the gzip decoder to start with (default: native where available, else web) */
  inflater?: Inflater;
  /** false when the layer's bytes can be read only once (a sandbox fed on its input) */
  rereadable?: boolean;
}

/**
 * The walk alone: writes the run's derived files under `base` and returns its record, touching
 * no metadata (a sandboxed walk has none to touch). A budget passed ends it with an
 * `unsupported` record that names the budget, and nothing of the run left behind.
 */
export async function walkLayer(o: WalkOptions): Promise<IndexResult> {
  const rereadable = o.rereadable ?? true;
  const first = o.inflater ?? (nativeZlibAvailable() ? "native" : rereadable ? "web" : "node");
  const fast = await walkOnce({ ...o, inflater: first });
  if (fast) return fast;
  if (!rereadable) throw new IndexError(`the ${first} decoder failed`, false);
  return (await walkOnce({ ...o, inflater: "node" }))!;
}

type WalkOnceOptions = Omit<WalkOptions, "inflater" | "rereadable"> & { inflater: Inflater };

/** One pass with one decoder; null: the decoder failed where node:zlib may not (walkLayer). */
async function walkOnce(o: WalkOnceOptions): Promise<IndexResult | null> {
  const { limits, store, base } = o;
  await store.deleteDerived(base);
  const opened = await openLayer(o);
  if ("refused" in opened) return unsupportedResult(base, opened.refused, null);
  const { compression } = opened;
  // Listing: NDJSON and the endpoint's document, written while the walk goes on.
  const listing = new BatchedListing(new ListingWriter(store, base));
  const decoded = await decodeLayer({ ...o, compression });
  const counted = countUncompressed({ tar: decoded.tar, limits, size: o.size, compression });
  const read = await readEntries({ tar: counted.tar, limits, listing, signal: o.signal });
  let walkError: string | null = null;
  if (read.stopped) {
    const e = read.stopped.reason;
    const verdict = await stoppedWalk({ ...o, compression, listing, decoded, reason: e });
    if (verdict !== "partial") return verdict;
    walkError = e instanceof Error ? e.message : String(e);
    if (read.entries === 0) {
      await listing.abort(new Error(walkError));
      await store.deleteDerived(base).catch(() => {});
      // Nothing readable at all: a compressed blob that is no tar, or garbage.
      return unsupportedResult(
        base,
        e instanceof IndexError ? walkError : `not a tar archive (${walkError})`,
        compression,
      );
    }
  }
  await listing.flush();
  // The walk stops at the end-of-archive blocks without reading on: the decoder worker would
  // wait for it to take what follows (padding, or anything after the archive) forever.
  decoded.stop();
  const tablesError = await decoded.finish();
  if (tablesError !== null && walkError === null) walkError = tablesError;
  return await finishRun({
    listing,
    base,
    compression,
    uncompressedSize: counted.total(),
    entries: read.entries,
    walkError,
  });
}

interface StoppedWalk extends WalkOnceOptions {
  compression: Compression;
  listing: BatchedListing;
  decoded: DecodedLayer;
  reason: unknown;
}

/**
 * What a walk that stopped early comes to: "partial" (a limit, a tar or decoding error: what
 * was listed is kept), an `unsupported` result (a budget passed: nothing of the run stays),
 * null (the decoder failed where node:zlib may not: the run is dropped for another pass), or
 * the error thrown on (an abort, anything unforeseen).
 */
async function stoppedWalk(o: StoppedWalk): Promise<IndexResult | null | "partial"> {
  const { reason: e, compression, listing } = o;
  if (e instanceof DOMException && e.name === "AbortError") {
    await listing.abort(e);
    throw e;
  }
  // Drops everything the run wrote so far.
  const discard = async () => {
    await listing.abort(e);
    await o.decoded.discard(e);
    await o.store.deleteDerived(o.base).catch(() => {});
  };
  if (e instanceof BudgetExceededError) {
    // Nothing of a run that passed a budget stays: no listing is served as if it were whole.
    o.decoded.stop();
    await discard();
    return unsupportedResult(o.base, e.message, compression, e);
  }
  if (
    o.inflater !== "node" && compression !== "none" && !(e instanceof IndexError) &&
    !(e instanceof TarError) && !(e instanceof CompressedDataError) &&
    // node:zlib's zstd errors name the data's fault: re-running cannot do better
    !(compression === "zstd" && isDecodeError(e))
  ) {
    await discard();
    return null;
  }
  if (e instanceof IndexError || e instanceof TarError || isDecodeError(e)) return "partial";
  await listing.abort(e);
  throw e;
}

interface FinishedRun {
  listing: BatchedListing;
  base: string;
  compression: Compression;
  uncompressedSize: number;
  entries: number;
  /** why the walk stopped before the archive's end (a partial listing), or null */
  walkError: string | null;
}

/** Stage 4's end: the listing closed with its tail, and the run's record. */
async function finishRun(o: FinishedRun): Promise<IndexResult> {
  const outcome = o.walkError === null ? "ready" : "partial";
  const error = o.walkError === null ? {} : { error: o.walkError };
  const documentSize = await o.listing.close({
    compression: o.compression,
    uncompressedSize: o.uncompressedSize,
    state: outcome,
    ...error,
  });
  return {
    record: {
      version: INDEX_VERSION,
      state: outcome,
      compression: o.compression,
      uncompressedSize: o.uncompressedSize,
      entries: o.entries,
      ...error,
      indexedAt: Date.now(),
      documentSize,
      base: o.base,
    },
    error: o.walkError ?? undefined,
  };
}
