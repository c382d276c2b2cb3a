// Image reports (packages, advisories, config secrets): the `scan` queue's two jobs, the advisory
// watch, and the reads behind `/v2/<ns>/_svc/vulnerabilities/<digest>` and the image diff (the
// answers are report_answer.ts's and report_diff.ts's).
import type { Config } from "../config/mod.ts";
import type { DigestHolds, ManifestMeta, SvcMeta } from "../metadata/mod.ts";
import {
  BatchRun,
  type JobContext,
  periodic,
  PermanentJobError,
  type ProgressSink,
  type Runs,
} from "../jobs/mod.ts";
import { isImage, SCAN_KIND, scanImageJob } from "./scan_jobs.ts";
import { parseManifest } from "../oci/mod.ts";
import { type HealOptions, LayerReader } from "../index/mod.ts";
import { catalogWalk } from "../index/mod.ts";
import type { ImageDiff } from "./image_diff.ts";
import { log } from "../log.ts";
import type { AdvisoryMeta, AdvisoryStore } from "./advisory_store.ts";
import { type ScanDeps, Scanner } from "./scanner.ts";
import { SCAN_VERSION } from "./image_report.ts";
import type { ScanRecord } from "./scan_records.ts";
import { healReports, type ReportHealResult } from "./report_heal.ts";
import { AdvisoryRefresh } from "./advisory_refresh.ts";
import { answerReport, type ReportAnswer } from "./report_answer.ts";
import { ImageDiffs } from "./report_diff.ts";

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
const LOAD_LOCK = "advisories";

export class Reports {
  readonly scanner: Scanner;
  readonly advisories: AdvisoryStore;
  readonly refresh: AdvisoryRefresh;
  private readonly meta: ReportsDeps["revisions"];
  private readonly diffs: ImageDiffs;
  private stopWatch = () => {};
  private readonly cfg: Config;
  private readonly deps: ReportsDeps;

  constructor(deps: ReportsDeps) {
    this.cfg = deps.cfg;
    this.deps = deps;
    this.scanner = new Scanner(deps, new LayerReader(deps.store), deps.cfg.scan);
    this.advisories = this.scanner.advisories;
    this.meta = deps.revisions;
    this.diffs = new ImageDiffs(deps.cfg, deps);
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
    const batch = new BatchRun(
      this.deps.runs,
      this.deps.jobs,
      "rescan",
      `${opts.onlyStale ? "images without a current report" : "every image"} of ${
        opts.namespace ? `namespace ${opts.namespace}` : "every namespace"
      }`,
      opts.cause ?? "scan command",
    );
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
          if (!opts.dryRun) await batch.enqueue(scanImageJob(digest, w.ns));
        }
        step = { index: w.index + 1, total: w.total };
        report();
      }
      await batch.finish();
    } finally {
      await batch.stop();
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
  report(ns: string, digest: string): Promise<ReportAnswer> {
    return answerReport(
      {
        revisions: this.meta,
        manifests: this.deps.manifests,
        advisories: this.advisories,
        scanner: this.scanner,
        refresh: this.refresh,
        current: (ns, digest) => this.current(ns, digest),
      },
      ns,
      digest,
    );
  }

  /**
   * Two images of `ns` compared (refs are tags or digests). 202 while a layer of either is not
   * indexed yet (its index job is queued); a layer indexed but not ready (partial, unsupported,
   * …) or whose blob is not stored is named on its side, and the diff is not `complete`.
   */
  diff(
    ns: string,
    fromRef: string,
    toRef: string,
    limit: number,
  ): Promise<{ status: 202 } | { status: 200; diff: ImageDiff }> {
    return this.diffs.diff(ns, fromRef, toRef, limit);
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
