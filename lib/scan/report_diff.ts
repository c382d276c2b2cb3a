// The image diff behind `/v2/<ns>/_svc/diff`: two images' merged listings compared, here for
// small images or in a sandbox process (diff_child.ts), one diff at a time per process.
import type { Config } from "../config/mod.ts";
import { notApplicable, parseManifest, tooManyRequests, truncate } from "../oci/mod.ts";
import { INDEX_VERSION, type IndexRecord, LayerReader, tarLayers } from "../index/mod.ts";
import { isSandboxVerdict, runSandboxedJson } from "../sandbox/mod.ts";
import { diffImages, type ImageDiff, type SideInfo, type UnindexedLayer } from "./image_diff.ts";
import { mergeLayers } from "./merged_fs.ts";
import { INLINE_MERGE_ENTRIES, listingsFor } from "./listing_frames.ts";
import type { DiffArgs } from "./diff_child.ts";
import { isImage } from "./scan_jobs.ts";
import type { ScanDeps } from "./scanner.ts";

/** `n` of the diff: entries per list (added, removed, modified) */
export const DIFF_DEFAULT_N = 1000;
export const DIFF_MAX_N = 10_000;
const DIFF_CHILD = new URL("./diff_child.ts", import.meta.url);
/** DIFF_MAX_N entries in each of three lists, with paths of up to 16 KiB: far below this. */
const MAX_DIFF_OUTPUT = 256 << 20;

/**
 * Index states a newer indexer re-walks: a record of an older version in one of these is awaited
 * (202). Any other state (indexing that could not run: no listing of any version) is named in the
 * diff instead of awaited without end.
 */
const REINDEXED: ReadonlySet<string> = new Set(["ready", "partial", "unsupported"]);

/** Image diffs, one at a time. */
export class ImageDiffs {
  private diffing = false;

  constructor(
    private readonly cfg: Config,
    private readonly deps: Pick<ScanDeps, "manifests" | "layers" | "blobs" | "store">,
  ) {}

  /**
   * Two images of `ns` compared (refs are tags or digests). 202 while a layer of either is not
   * indexed yet (its index job is queued); a layer indexed but not ready (partial, unsupported,
   * …) or whose blob is not stored is named on its side, and the diff is not `complete`.
   */
  async diff(
    ns: string,
    fromRef: string,
    toRef: string,
    limit: number,
  ): Promise<{ status: 202 } | { status: 200; diff: ImageDiff }> {
    const sides = [];
    for (const ref of [fromRef, toRef]) {
      const { digest, rev } = await this.deps.manifests.resolve(ns, ref);
      const parsed = parseManifest(await this.deps.manifests.body(digest, rev), rev.mediaType);
      if (!isImage(parsed)) {
        throw notApplicable(
          `${truncate(ref)} is not an image${
            parsed.children.length ? ": name one platform's manifest" : ""
          }`,
        );
      }
      sides.push({ digest, layers: tarLayers(parsed) });
    }
    let waiting = false;
    // Per side, the listing of each layer (null: none to read) and the layers not fully indexed.
    const recs: (IndexRecord | null)[][] = [];
    const infos: SideInfo[] = [];
    for (const s of sides) {
      const got: (IndexRecord | null)[] = [];
      const unindexed: UnindexedLayer[] = [];
      for (const d of s.layers) {
        const rec = await this.deps.layers.record(d);
        if (!rec || (rec.version < INDEX_VERSION && REINDEXED.has(rec.state))) {
          // A layer whose bytes are not here will never be indexed: named now, not awaited.
          if (!(await this.deps.blobs.blob(d))) {
            unindexed.push({
              digest: d,
              state: "not-stored",
              error: "its blob is not stored here",
            });
            got.push(null);
            continue;
          }
          waiting = true;
          await this.deps.layers.queueIndex(d);
          continue;
        }
        // Any state but ready (partial, unsupported, indexing that could not run on this
        // machine, one the indexer adds later) is named: what it holds was not (all) compared.
        // Only ready and partial records have a listing.
        if (rec.state !== "ready") {
          unindexed.push({
            digest: d,
            state: rec.state,
            ...(rec.error ? { error: rec.error } : {}),
          });
          // A layer whose indexing could not run gets its retry queued, as its entries do.
          if (!REINDEXED.has(rec.state)) await this.deps.layers.queueIndex(d);
        }
        got.push(rec.state === "ready" || rec.state === "partial" ? rec : null);
      }
      recs.push(got);
      infos.push({ ...s, unindexed });
    }
    if (waiting) return { status: 202 };
    // A diff holds both images' merged trees (in a sandbox when large): its size is bounded by
    // entries, and one runs at a time per process (six diffs of a 1M-file image at once took
    // 3.9 GiB when they ran here).
    const total = recs.flat().reduce((n, r) => n + (r?.entries ?? 0), 0);
    const max = this.cfg.scan.maxDiffEntries;
    if (total > max) {
      throw notApplicable(
        `the two images hold ${total} layer entries; images over ${max} together are not compared ([scan] max_diff_entries)`,
      );
    }
    if (this.diffing) {
      throw tooManyRequests("another image diff is being computed", 1);
    }
    this.diffing = true;
    try {
      return await this.diffMerged(infos, recs, limit, total);
    } finally {
      this.diffing = false;
    }
  }

  /**
   * The diff of two images' merged listings: here for small images (tens of milliseconds),
   * else in a sandbox process (diff_child.ts) under the scan budgets.
   */
  private async diffMerged(
    sides: SideInfo[],
    groups: (IndexRecord | null)[][],
    limit: number,
    total: number,
  ): Promise<{ status: 200; diff: ImageDiff }> {
    // A reader per diff: its lookup caches go with it.
    const reader = new LayerReader(this.deps.store);
    const mode = this.cfg.scan.sandbox;
    if (mode === "off" || total <= INLINE_MERGE_ENTRIES) {
      const merged = [];
      for (const g of groups) {
        merged.push(
          await mergeLayers(
            g.map((rec) => () => rec ? reader.entries(rec) : (async function* () {})()),
          ),
        );
      }
      return {
        status: 200,
        diff: diffImages(
          { ...sides[0], merged: merged[0] },
          { ...sides[1], merged: merged[1] },
          limit,
        ),
      };
    }
    const { input, readPaths, stdin } = listingsFor(reader, groups, mode);
    try {
      const diff = await runSandboxedJson<ImageDiff>({
        mode,
        label: "diff",
        module: DIFF_CHILD,
        args: { listings: input, sides, limit } satisfies DiffArgs,
        readPaths,
        stdin,
        budget: this.cfg.scan.budget,
        maxOutputBytes: MAX_DIFF_OUTPUT,
      });
      return { status: 200, diff };
    } catch (e) {
      if (isSandboxVerdict(e)) {
        throw notApplicable(`the images could not be compared: ${e.message}`);
      }
      throw e;
    }
  }
}
