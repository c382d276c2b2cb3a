// What the registry holds and checks: open uploads, storage per repository and the cache's
// evictions, pull-through answers and upstream calls, signature verdicts and holds, and the
// advisory snapshot.
import { Counter, Gauge, Histogram, type InstrumentSet, MetricGroup } from "./instruments.ts";
import { REQUEST_BUCKETS } from "./http_metrics.ts";

/** One repository's storage as the repositories listing reports it (issue 26). */
export interface RepositoryUsageFigures {
  repository: string;
  used: number;
  quota: number | null;
  cache: number | null;
}

/** The registry's content figures and callbacks. */
export class RegistryMetrics extends MetricGroup {
  readonly uploadSessions = this.set.add(
    new Gauge("wharf_upload_sessions_open", "Upload sessions recorded in the metadata store", []),
  );

  readonly advisoryRecords = this.set.add(
    new Gauge(
      "wharf_advisory_records",
      "OSV records and package entries in the current advisory snapshot",
      ["kind"],
    ),
  );

  readonly advisoryLoad = this.set.add(
    new Gauge("wharf_advisory_load_seconds", "Duration of the current snapshot's load", []),
  );

  readonly advisoryLoadedAt = this.set.add(
    new Gauge(
      "wharf_advisory_loaded_timestamp_seconds",
      "When the current advisory snapshot was loaded (0: none)",
      [],
    ),
  );

  /** issue 26: storage per repository (with any quota or cache cap configured), at scrape time */
  private readonly repositoryUsed = this.set.add(
    new Gauge(
      "wharf_repository_used_bytes",
      "Bytes a repository holds, each distinct digest once (shown when quotas or cache caps are configured)",
      ["repository"],
    ),
  );

  private readonly repositoryLimit = this.set.add(
    new Gauge(
      "wharf_repository_limit_bytes",
      "A repository's storage limit by kind: quota (pushes refused past it) or cache (evicted under it)",
      ["repository", "kind"],
    ),
  );

  private readonly cacheEvictions = this.set.add(
    new Counter(
      "wharf_cache_evictions_total",
      "Cached images evicted to keep a pull-through repository under max_cache_bytes",
      ["repository"],
    ),
  );

  /** issue 34: signature verdicts and holds */
  private readonly signatureVerdicts = this.set.add(
    new Counter(
      "wharf_signature_verdicts_total",
      "Signature verdicts stored, by repository and result (verified, unverified, artifact)",
      ["repository", "result"],
    ),
  );

  private readonly signatureHolds = this.set.add(
    new Counter(
      "wharf_signature_holds_total",
      "Held images by repository and event: held, released (a signature verified), rejected (deleted when the hold ran out), kept (still held when it ran out), denied (a pull refused)",
      ["repository", "event"],
    ),
  );

  private readonly signatureVerifySeconds = this.set.add(
    new Histogram(
      "wharf_signature_verify_seconds",
      "Wall time of verifying one image's signatures (finding and reading its artifacts included)",
      [],
      [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    ),
  );

  private readonly pullThrough = this.set.add(
    new Counter(
      "wharf_pull_through_total",
      "Pull-through answers by kind (manifest, blob) and result (hit, miss, revalidated, stale, error)",
      ["kind", "result"],
    ),
  );

  private readonly upstreamDuration = this.set.add(
    new Histogram(
      "wharf_upstream_request_duration_seconds",
      "Upstream requests by upstream, operation and outcome",
      ["upstream", "op", "outcome"],
      REQUEST_BUCKETS,
    ),
  );

  constructor(set: InstrumentSet) {
    super(set);
    this.uploadSessions.set(0);
  }

  /** Counted lazily at scrape time; the callback bounds its own work. */
  countUploadSessionsWith(count: () => Promise<number>): void {
    this.uploadSessions.collect = async () => this.uploadSessions.set(await count());
  }

  /** The advisory snapshot's figures, read at scrape time (one KV get). */
  advisoriesWith(
    meta: () => Promise<
      { records: number; affected: number; load_ms: number; loaded_at: number } | null
    >,
  ): void {
    this.advisoryRecords.collect = async () => {
      const m = await meta();
      this.advisoryRecords.set(m?.records ?? 0, ["records"]);
      this.advisoryRecords.set(m?.affected ?? 0, ["package_entries"]);
      this.advisoryLoad.set((m?.load_ms ?? 0) / 1000);
      this.advisoryLoadedAt.set((m?.loaded_at ?? 0) / 1000);
    };
  }

  /** Usage per repository, read at scrape time; `read` bounds its own work. */
  repositoryUsageWith(read: () => Promise<RepositoryUsageFigures[]>): void {
    this.repositoryUsed.collect = async () => {
      for (const r of await read()) {
        this.repositoryUsed.set(r.used, [r.repository]);
        if (r.quota !== null) this.repositoryLimit.set(r.quota, [r.repository, "quota"]);
        if (r.cache !== null) this.repositoryLimit.set(r.cache, [r.repository, "cache"]);
      }
    };
  }

  /** Verdicts, holds and verification time of signatures (lib/registry SignatureObserver). */
  readonly signatures = {
    verdict: (repository: string, result: string): void =>
      this.signatureVerdicts.inc([repository, result]),
    hold: (repository: string, event: string): void => this.signatureHolds.inc([repository, event]),
    verifySeconds: (seconds: number): void => this.signatureVerifySeconds.observe(seconds, []),
  };

  readonly cacheEvicted = (repository: string, images: number): void =>
    this.cacheEvictions.inc([repository], images);

  pullThroughResult(kind: "manifest" | "blob", result: string): void {
    this.pullThrough.inc([kind, result]);
  }

  readonly observeUpstream = (
    upstream: string,
    op: string,
    outcome: string,
    seconds: number,
  ): void => this.upstreamDuration.observe(seconds, [upstream, op, outcome]);
}
