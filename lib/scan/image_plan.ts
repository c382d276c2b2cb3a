// What a scan reads: its layers' index records (waiting for the missing ones, which it queues),
// then which files of the merged filesystem hold package databases (scan_plan.ts, inline for a
// small image, else in a sandbox process fed the listings).
import {
  INDEX_VERSION,
  type IndexRecord,
  type LayerIndexReader,
  type LayerReader,
  listed,
  machineFailure,
} from "../index/mod.ts";
import { isSandboxVerdict, runSandboxedJson } from "../sandbox/mod.ts";
import type { ScanConfig } from "../config/mod.ts";
import type { BlobMeta } from "../metadata/mod.ts";
import { planImage, type ScanPlan } from "./scan_plan.ts";
import { INLINE_MERGE_ENTRIES, listingsFor } from "./listing_frames.ts";
import type { PlanArgs } from "./plan_child.ts";

const PLAN_CHILD = new URL("./plan_child.ts", import.meta.url);
/** The plan's files and Python paths are bounded by max_packages: far below this. */
const MAX_PLAN_OUTPUT = 64 << 20;

/** The index record a scan uses for a layer whose blob is not stored. */
const NOT_STORED: IndexRecord = {
  version: INDEX_VERSION,
  state: "unsupported",
  compression: null,
  uncompressedSize: 0,
  entries: 0,
  error: "its blob is not stored here",
  indexedAt: 0,
  base: "",
};
// A scan waits this long per attempt for missing layer indexes, then retries with backoff.
const INDEX_WAIT_MS = 60 * 1000;

/**
 * The index records of `layers`, queueing and awaiting the missing ones. A layer whose indexing
 * could not run (machine_failure.ts) fails the scan at once, its index job made sure to be
 * pending: the report would be built from no files of it.
 */
export async function layerRecords(
  deps: { layers: LayerIndexReader; blobs: Pick<BlobMeta, "blob"> },
  layers: string[],
  signal?: AbortSignal,
): Promise<IndexRecord[]> {
  const deadline = Date.now() + INDEX_WAIT_MS;
  let queued = false;
  for (;;) {
    const got = await Promise.all(layers.map(async (d) => {
      const rec = await deps.layers.record(d);
      const broken = machineFailure(rec);
      if (broken !== null) {
        await deps.layers.queueIndex(d);
        throw new Error(`layer ${d} could not be indexed: ${broken}`);
      }
      if (rec && rec.version >= INDEX_VERSION) return rec;
      // A layer whose bytes are not here (a manifest pushed with references it does not own)
      // will never be indexed: the report says so instead of waiting for it.
      return (await deps.blobs.blob(d)) ? null : NOT_STORED;
    }));
    const missing = layers.filter((_, i) => got[i] === null);
    if (missing.length === 0) return got as IndexRecord[];
    if (!queued) {
      for (const d of missing) await deps.layers.queueIndex(d);
      queued = true;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `${missing.length} layer(s) not indexed yet: ${missing.slice(0, 5).join(", ")}${
          missing.length > 5 ? ", …" : ""
        }`,
      );
    }
    signal?.throwIfAborted();
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * Which files of the image the report reads (scan_plan.ts): merged from the layer listings
 * here when the image lists few entries, else in a sandbox process fed the listings. A budget
 * passed leaves a plan without files, and a warning saying why.
 */
export async function planFiles(
  reader: LayerReader,
  opts: Pick<ScanConfig, "maxPackages" | "sandbox" | "budget">,
  recs: IndexRecord[],
  warnings: string[],
  signal?: AbortSignal,
): Promise<ScanPlan> {
  const lists = recs.map((rec) => listed(rec) ? rec : null);
  const entries = lists.reduce((n, r) => n + (r?.entries ?? 0), 0);
  if (opts.sandbox === "off" || entries <= INLINE_MERGE_ENTRIES) {
    const plan = await planImage(
      lists.map((rec) => () => rec ? reader.entries(rec) : (async function* () {})()),
      opts.maxPackages,
    );
    warnings.push(...plan.warnings);
    return plan;
  }
  const { input, readPaths, stdin } = listingsFor(reader, [lists], opts.sandbox);
  try {
    const plan = await runSandboxedJson<ScanPlan>({
      mode: opts.sandbox,
      label: "scan",
      module: PLAN_CHILD,
      args: { listings: input, maxPackages: opts.maxPackages } satisfies PlanArgs,
      readPaths,
      stdin,
      budget: opts.budget,
      maxOutputBytes: MAX_PLAN_OUTPUT,
      signal,
    });
    warnings.push(...plan.warnings);
    return plan;
  } catch (e) {
    if (!isSandboxVerdict(e)) throw e;
    warnings.push(`the layers' files were not looked through: ${e.message}`);
    return { files: [], pythonPaths: [], warnings: [] };
  }
}
