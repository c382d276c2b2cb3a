// Replication to downstreams (job outcomes, bytes, lag, the status view's counts) and scheduled
// pull syncs (lib/sync), as their status views report them.
import { Counter, Gauge, MetricGroup } from "./instruments.ts";

/** One sync entry's figures as the status view reports them (lib/sync SyncStatus). */
export interface SyncFigures {
  repository: string;
  last_run: string | null;
  next_run: string | null;
  last_outcome: string | null;
  tags_fetched: number;
}

/** One downstream's figures as the replication status view reports them. */
export interface ReplicationFigures {
  name: string;
  pending: number;
  failed: number;
  outcomes: Record<string, number>;
  /** RFC 3339, null: never */
  last_success_at: string | null;
}

/** What the Replicator and the status views report. */
export class ReplicationMetrics extends MetricGroup {
  private readonly replicationOutcomes = this.set.add(
    new Counter(
      "wharf_replication_jobs_total",
      "Replication job runs per downstream by outcome (pushed, deleted, superseded, skipped, tag-delete-unsupported, delete-unsupported, failed)",
      ["downstream", "outcome"],
    ),
  );

  private readonly replicationBytes = this.set.add(
    new Counter("wharf_replication_bytes_total", "Blob bytes uploaded to a downstream", [
      "downstream",
    ]),
  );

  private readonly replicationLastSuccess = this.set.add(
    new Gauge(
      "wharf_replication_last_success_timestamp_seconds",
      "When a replication job to the downstream last succeeded (any process, as the status view reports; this process's own when later)",
      ["downstream"],
    ),
  );

  private readonly replicationLag = this.set.add(
    new Gauge(
      "wharf_replication_lag_seconds",
      "Age of the oldest pending replication job per downstream (0: none pending)",
      ["downstream"],
    ),
  );

  // The status view's figures (GET /v2/_svc/replication/status), read from KV at scrape time:
  // the same numbers across every process.
  private readonly replicationPending = this.set.add(
    new Gauge(
      "wharf_replication_pending_jobs",
      "Pending replication jobs per downstream (as the status view counts them)",
      ["downstream"],
    ),
  );

  private readonly replicationFailed = this.set.add(
    new Gauge(
      "wharf_replication_failed_jobs",
      "Dead-lettered replication jobs per downstream",
      ["downstream"],
    ),
  );

  private readonly replicationRecorded = this.set.add(
    new Gauge(
      "wharf_replication_outcomes",
      "Replication job runs per downstream by outcome, across all processes (the status view's counts)",
      ["downstream", "outcome"],
    ),
  );

  // Scheduled pull syncs (lib/sync), as the status view reports them, read from KV at scrape time.
  private readonly syncLastRun = this.set.add(
    new Gauge(
      "wharf_sync_last_run_timestamp_seconds",
      "When the sync entry's last run ended (0: never)",
      ["repository", "entry"],
    ),
  );

  private readonly syncNextRun = this.set.add(
    new Gauge(
      "wharf_sync_next_run_timestamp_seconds",
      "When the sync entry runs next (0: at startup)",
      ["repository", "entry"],
    ),
  );

  private readonly syncTagsFetched = this.set.add(
    new Gauge(
      "wharf_sync_tags_fetched",
      "Tags the sync entry's last run fetched (new or moved)",
      ["repository", "entry"],
    ),
  );

  private readonly syncFailing = this.set.add(
    new Gauge(
      "wharf_sync_failing",
      "1 when the sync entry's last run did not end ok (failed, partial or rate-limited)",
      ["repository", "entry"],
    ),
  );

  /** Callbacks for the Replicator. */
  readonly replicationEvents = {
    outcome: (downstream: string, outcome: string) => {
      this.replicationOutcomes.inc([downstream, outcome]);
      if (outcome !== "failed") this.replicationLastSuccess.set(Date.now() / 1000, [downstream]);
    },
    bytes: (downstream: string, n: number) => this.replicationBytes.inc([downstream], n),
    /** The status view's per-downstream figures, read when metrics are scraped. */
    statusFrom: (read: () => Promise<ReplicationFigures[]>) => {
      this.replicationPending.collect = async () => {
        for (const d of await read()) {
          this.replicationPending.set(d.pending, [d.name]);
          this.replicationFailed.set(d.failed, [d.name]);
          for (const [outcome, n] of Object.entries(d.outcomes)) {
            this.replicationRecorded.set(n, [d.name, outcome]);
          }
          if (d.last_success_at !== null) {
            const at = Date.parse(d.last_success_at) / 1000;
            const mine = this.replicationLastSuccess.get([d.name]);
            this.replicationLastSuccess.set(Math.max(at, mine), [d.name]);
          }
        }
      };
    },
  };

  /** The sync entries' figures (lib/sync syncStatus, in config order), read at scrape time. */
  syncStatusFrom(read: () => Promise<SyncFigures[]>): void {
    this.syncLastRun.collect = async () => {
      const counts = new Map<string, number>();
      for (const s of await read()) {
        const n = counts.get(s.repository) ?? 0;
        counts.set(s.repository, n + 1);
        const l = [s.repository, String(n)];
        this.syncLastRun.set(s.last_run ? Date.parse(s.last_run) / 1000 : 0, l);
        this.syncNextRun.set(s.next_run ? Date.parse(s.next_run) / 1000 : 0, l);
        this.syncTagsFetched.set(s.tags_fetched, l);
        this.syncFailing.set(s.last_outcome !== null && s.last_outcome !== "ok" ? 1 : 0, l);
      }
    };
  }

  /** Replication lag per downstream at scrape time; `oldest` bounds its own work. */
  replicationLagWith(
    downstreams: readonly string[],
    oldest: () => Promise<Map<string, number>>,
  ): void {
    for (const d of downstreams) this.replicationLag.set(0, [d]);
    this.replicationLag.collect = async () => {
      const ages = await oldest();
      for (const d of downstreams) this.replicationLag.set(ages.get(d) ?? 0, [d]);
    };
  }
}
