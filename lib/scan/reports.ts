// Image reports (packages, advisories, config secrets): the `scan` queue's two jobs, the advisory
// watch, and the reads behind `/v2/<ns>/_svc/vulnerabilities/<digest>` and the image diff.
import type { Config } from "../config/mod.ts";
import type { DigestHolds, ManifestMeta, SvcMeta } from "../metadata/mod.ts";
import {
  type JobContext,
  periodic,
  PermanentJobError,
  type ProgressSink,
  type Runs,
  type RunTracker,
} from "../jobs/mod.ts";
import { isImage, SCAN_KIND, scanImageJob } from "./scan_jobs.ts";
import { parseManifest, RegistryError, truncate } from "../oci/mod.ts";
import { type HealOptions, INDEX_VERSION, type IndexRecord, LayerReader } from "../index/mod.ts";
import { catalogWalk, tarLayers } from "../index/mod.ts";
import { diffImages, type ImageDiff, type SideInfo, type UnindexedLayer } from "./image_diff.ts";
import { mergeLayers } from "./merged_fs.ts";
import { INLINE_MERGE_ENTRIES, listingsFor } from "./listing_frames.ts";
import type { DiffArgs } from "./diff_child.ts";
import { isSandboxVerdict, runSandboxedJson } from "../sandbox/mod.ts";
import { log } from "../log.ts";
import type { AdvisoryMeta, AdvisoryStore } from "./advisory_store.ts";
import { type ScanDeps, Scanner } from "./scanner.ts";
import { type ImageReport, SCAN_VERSION } from "./image_report.ts";
import type { ScanRecord } from "./scan_records.ts";
import { healReports, type ReportHealResult } from "./report_heal.ts";
import { type AdvisoryDownloadProblem, AdvisoryRefresh } from "./advisory_refresh.ts";
import { notCheckedReason } from "./formats.ts";

/** What Reports works with: the scanner's dependencies and the config's `[scan]`. */
export interface ReportsDeps extends ScanDeps {
  cfg: Config;
  /** the revisions a rescan walks, and the catalog pages the heal pass looks through */
  revisions: Pick<ManifestMeta, "revision" | "revisions" | "catalog">;
  /** the namespaces of the category index (a rescan's walk) */
  catalog: Pick<SvcMeta, "indexed">;
  /** which namespace holds a report's image (the heal pass) */
  holds: Pick<DigestHolds, "revisions">;
  /** a rescan's run record, which the Jobs page shows (lib/jobs/progress.ts) */
  runs: Pick<Runs, "start">;
}

export const LOAD_KIND = "load-advisories";
/** `n` of the diff: entries per list (added, removed, modified) */
export const DIFF_DEFAULT_N = 1000;
export const DIFF_MAX_N = 10_000;
const DIFF_CHILD = new URL("./diff_child.ts", import.meta.url);
/** DIFF_MAX_N entries in each of three lists, with paths of up to 16 KiB: far below this. */
const MAX_DIFF_OUTPUT = 256 << 20;
const LOAD_LOCK = "advisories";
/**
 * Index states a newer indexer re-walks: a record of an older version in one of these is awaited
 * (202). Any other state (indexing that could not run: no listing of any version) is named in the
 * diff instead of awaited without end.
 */
const REINDEXED: ReadonlySet<string> = new Set(["ready", "partial", "unsupported"]);

export interface PlatformSummary {
  digest: string;
  platform: { os?: string; architecture?: string; variant?: string } | null;
  status: "ready" | "scanning" | "not-an-image";
  /** a ready report matched against advisories; absent when it was */
  counts?: ScanRecord["counts"];
  /**
   * false (with `not_checked`, the reason, and no `counts`) for a ready report matched against
   * no advisory record: its zero counts would read as a clean image. Absent when checked.
   */
  vulnerabilities_checked?: false;
  not_checked?: string;
  scanned_at?: string;
  report: string;
}

/**
 * Why a stored report (by its record) was not matched against advisories, or null when it was:
 * the scanner's reasons (uncheckedReason), told from what the record keeps. A record written
 * before `checked` existed counts as checked when it names a snapshot that holds records.
 */
function recordNotChecked(rec: ScanRecord, adv: AdvisoryMeta | null): string | null {
  const records = rec.snapshot !== null && adv?.snapshot === rec.snapshot ? adv.records : null;
  if (rec.checked ?? (rec.snapshot !== null && records !== 0)) return null;
  if (rec.snapshot === null) return "no advisory data is loaded";
  if (records === 0) return "the advisory snapshot holds no records";
  const ecosystems = rec.ecosystems ?? [];
  return `the advisory snapshot holds no records for ${
    ecosystems.length > 0 ? ecosystems.join(", ") : "this image's packages"
  }`;
}

/** A stored report with `vulnerabilities_checked` (and `not_checked`), older reports included. */
function withCheck(report: ImageReport): ImageReport {
  const reason = notCheckedReason(report);
  return reason === null
    ? { ...report, vulnerabilities_checked: true }
    : { ...report, vulnerabilities_checked: false, not_checked: reason };
}

export type ReportAnswer =
  | { status: 202 }
  | {
    status: 200;
    kind: "image";
    /** with the last advisory download's failure, when it failed (advisory_refresh.ts) */
    report: ImageReport & { advisory_download?: AdvisoryDownloadProblem };
    refreshing: boolean;
  }
  | { status: 200; kind: "index"; digest: string; manifests: PlatformSummary[] };

export class Reports {
  private diffing = false;
  readonly scanner: Scanner;
  readonly advisories: AdvisoryStore;
  readonly refresh: AdvisoryRefresh;
  private readonly meta: ReportsDeps["revisions"];
  private readonly blobs: ReportsDeps["blobs"];
  private stopWatch = () => {};
  private readonly cfg: Config;
  private readonly deps: ReportsDeps;

  constructor(deps: ReportsDeps) {
    this.cfg = deps.cfg;
    this.deps = deps;
    this.scanner = new Scanner(deps, new LayerReader(deps.store), deps.cfg.scan);
    this.advisories = this.scanner.advisories;
    this.meta = deps.revisions;
    this.blobs = deps.blobs;
    this.refresh = new AdvisoryRefresh(deps.cfg, deps, () => this.queueLoad());
  }

  register(): void {
    this.deps.jobs.handle("scan", SCAN_KIND, async (job) => {
      await this.scanner.run(job);
      const digest = (job.payload as { digest?: unknown } | null)?.digest;
      if (typeof digest !== "string") return;
      await this.refresh.scanned(digest).catch((e) =>
        log.warn("advisory fetch check failed", { digest, error: String(e) })
      );
    });
    this.deps.jobs.handle("scan", LOAD_KIND, (job) => this.loadJob(job));
    this.refresh.register();
  }

  /**
   * Checks `advisories_dir` now and every `reload_interval_secs`: a change queues a load, and
   * with `refresh_interval_secs` a download that is due is queued.
   */
  watchAdvisories(): void {
    const dir = this.cfg.scan.advisoriesDir;
    if (!dir) return;
    const check = async () => {
      await this.refresh.tick().catch((e) =>
        log.warn("advisory download schedule check failed", { dir, error: String(e) })
      );
      try {
        if (await this.advisories.changed(dir)) await this.queueLoad();
      } catch (e) {
        log.warn("advisory check failed", { dir, error: String(e) });
      }
    };
    this.stopWatch = periodic("advisory check", this.cfg.scan.reloadIntervalSecs * 1000, check, {
      immediate: true,
      unref: true,
    });
  }

  stop(): void {
    this.stopWatch();
  }

  async queueLoad(force = false): Promise<void> {
    await this.deps.jobs.queue("scan").enqueue({
      kind: LOAD_KIND,
      payload: { force },
      lockKey: LOAD_LOCK,
    });
  }

  private async loadJob(job: JobContext): Promise<void> {
    const dir = this.cfg.scan.advisoriesDir;
    if (!dir) throw new PermanentJobError("[scan] advisories_dir is not set");
    const force = (job.payload as { force?: unknown } | null)?.force === true;
    const r = await this.advisories.load(dir, { force, signal: job.signal });
    if (!r.loaded) return;
    if (r.meta) {
      log.info("advisories loaded", {
        snapshot: r.meta.snapshot,
        records: r.meta.records,
        affected: r.meta.affected,
        errors: r.meta.error_count,
        ms: r.meta.load_ms,
      });
    } else log.warn("advisories unloaded: the directory holds no advisory file", { dir });
    await this.rescanAll({
      cause: r.meta ? `advisories loaded (snapshot ${r.meta.snapshot})` : "advisories unloaded",
    });
  }

  /**
   * Queues a scan of every platform image (of `namespace` only, when given). Returns how many
   * were queued; a digest held by several namespaces is queued once. The jobs queued form one
   * batch whose progress the Jobs page shows (lib/jobs/progress.ts).
   */
  async rescanAll(
    opts: {
      namespace?: string;
      dryRun?: boolean;
      /** only images without a report of the current advisory snapshot */
      onlyStale?: boolean;
      report?: (line: string) => void;
      progress?: ProgressSink;
      /** why it runs, as the run's record says */
      cause?: string;
    } = {},
  ): Promise<number> {
    const seen = new Set<string>();
    let queued = 0;
    let run: RunTracker | null = null;
    let inBatch = 0;
    let step = { index: 0, total: opts.namespace ? 1 : null as number | null };
    const report = () =>
      opts.progress?.({
        unit: "namespaces",
        done: step.index,
        total: step.total,
        note: `${seen.size} image(s), ${queued} ${opts.dryRun ? "to queue" : "queued"}`,
      });
    try {
      for await (const w of catalogWalk(this.deps.catalog, opts.namespace)) {
        step = w;
        for await (const { digest, rec } of this.meta.revisions(w.ns)) {
          if (seen.has(digest)) continue;
          let parsed;
          try {
            parsed = parseManifest(await this.deps.manifests.body(digest, rec), rec.mediaType);
          } catch {
            continue;
          }
          if (!isImage(parsed)) continue;
          seen.add(digest);
          report();
          if (opts.onlyStale && !(await this.stale(digest))) continue;
          queued++;
          opts.report?.(`scan ${w.ns}@${digest}`);
          if (!opts.dryRun) {
            run ??= await this.deps.runs.start(
              "rescan",
              `${opts.onlyStale ? "images without a current report" : "every image"} of ${
                opts.namespace ? `namespace ${opts.namespace}` : "every namespace"
              }`,
              opts.cause ?? "scan command",
            );
            const r = await this.deps.jobs.queue("scan").enqueue({
              ...scanImageJob(digest, w.ns),
              batch: run.batch,
            });
            // A scan already pending for the image is another run's.
            if (r.enqueued) run.update({ queued: ++inBatch });
          }
        }
        step = { index: w.index + 1, total: w.total };
        report();
      }
      // A batch whose every job was pending already (another run's) has nothing to show.
      if (inBatch === 0) await run?.discard();
      else await run?.finish({ total: inBatch, queued: inBatch });
    } finally {
      await run?.stop();
    }
    return queued;
  }

  private async stale(digest: string): Promise<boolean> {
    const rec = await this.scanner.record(digest);
    const adv = await this.advisories.meta();
    return !rec || rec.version < SCAN_VERSION || (adv?.snapshot ?? null) !== rec.snapshot;
  }

  /**
   * One heal pass over the stored reports and the `scan` queue's dead letters (report_heal.ts):
   * what was built or failed while a parse could not run is rescanned.
   */
  heal(opts: HealOptions): Promise<ReportHealResult> {
    const d = this.deps;
    return healReports(
      {
        records: d.records,
        revisions: d.revisions,
        holds: d.holds,
        scanner: this.scanner,
        jobs: d.jobs,
      },
      opts,
    );
  }

  async status(): Promise<AdvisoryMeta | null> {
    return await this.advisories.meta();
  }

  /** The report of a manifest of `ns`: an image's, or one summary per platform of an index. */
  async report(ns: string, digest: string): Promise<ReportAnswer> {
    const rev = await this.meta.revision(ns, digest);
    if (!rev) {
      throw new RegistryError("MANIFEST_UNKNOWN", `${truncate(ns)}@${truncate(digest)}`);
    }
    const parsed = parseManifest(await this.deps.manifests.body(digest, rev), rev.mediaType);
    if (parsed.children.length > 0) {
      const manifests: PlatformSummary[] = [];
      const adv = await this.advisories.meta();
      for (const child of parsed.children.slice(0, 256)) {
        const link = `/v2/${ns}/_svc/vulnerabilities/${child.digest}`;
        const platform = child.platform
          ? {
            os: child.platform.os,
            architecture: child.platform.architecture,
            ...(child.platform.variant ? { variant: child.platform.variant } : {}),
          }
          : null;
        const childRev = await this.meta.revision(ns, child.digest);
        let image = false;
        if (childRev) {
          try {
            image = isImage(
              parseManifest(
                await this.deps.manifests.body(child.digest, childRev),
                childRev.mediaType,
              ),
            );
          } catch {
            image = false;
          }
        }
        if (!image) {
          manifests.push({ digest: child.digest, platform, status: "not-an-image", report: link });
          continue;
        }
        const rec = await this.current(ns, child.digest);
        if (!rec) {
          manifests.push({ digest: child.digest, platform, status: "scanning", report: link });
          continue;
        }
        const notChecked = recordNotChecked(rec, adv);
        manifests.push({
          digest: child.digest,
          platform,
          status: "ready",
          ...(notChecked === null
            ? { counts: rec.counts }
            : { vulnerabilities_checked: false, not_checked: notChecked }),
          scanned_at: new Date(rec.scanned_at).toISOString(),
          report: link,
        });
      }
      return { status: 200, kind: "index", digest, manifests };
    }
    if (!isImage(parsed)) {
      throw new RegistryError("UNSUPPORTED", `${truncate(digest)} is not an image: no report`, {
        status: 404,
      });
    }
    const rec = await this.current(ns, digest);
    if (!rec) return { status: 202 };
    const adv = await this.advisories.meta();
    const refreshing = (adv?.snapshot ?? null) !== rec.snapshot;
    const download = await this.refresh.problem();
    return {
      status: 200,
      kind: "image",
      report: {
        ...withCheck(await this.scanner.report(rec)),
        ...(download ? { advisory_download: download } : {}),
      },
      refreshing,
    };
  }

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
        throw new RegistryError(
          "UNSUPPORTED",
          `${truncate(ref)} is not an image${
            parsed.children.length ? ": name one platform's manifest" : ""
          }`,
          { status: 404 },
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
          if (!(await this.blobs.blob(d))) {
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
      throw new RegistryError(
        "UNSUPPORTED",
        `the two images hold ${total} layer entries; images over ${max} together are not compared ([scan] max_diff_entries)`,
        { status: 404 },
      );
    }
    if (this.diffing) {
      throw new RegistryError("TOOMANYREQUESTS", "another image diff is being computed", {
        headers: { "Retry-After": "1" },
      });
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
        throw new RegistryError("UNSUPPORTED", `the images could not be compared: ${e.message}`, {
          status: 404,
        });
      }
      throw e;
    }
  }

  /** The stored record, queueing a scan when there is none or it is out of date. */
  private async current(ns: string, digest: string): Promise<ScanRecord | null> {
    const rec = await this.scanner.record(digest);
    if (await this.stale(digest)) {
      await this.deps.jobs.queue("scan").enqueue(scanImageJob(digest, ns));
    }
    return rec;
  }
}
