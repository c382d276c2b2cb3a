// Scrub runs and what they reclaimed, integrity failures and quarantined digests, verify runs.
import { Counter, Gauge, type InstrumentSet, MetricGroup } from "./instruments.ts";

export const SCRUB_KINDS = ["blobs", "bytes", "uploads", "links", "namespaces", "pulls"] as const;

export interface ScrubResult {
  ok: boolean;
  seconds: number;
  /** per kind (SCRUB_KINDS; others are exported too) */
  reclaimed: Record<string, number>;
}

/** What scrub, the integrity checks and verify report. */
export class MaintenanceMetrics extends MetricGroup {
  readonly scrubRuns = this.set.add(
    new Counter("wharf_scrub_runs_total", "Scrub runs by result", ["result"]),
  );

  readonly scrubReclaimed = this.set.add(
    new Counter("wharf_scrub_reclaimed_total", "Items reclaimed by scrub, by kind", ["kind"]),
  );

  readonly scrubLastRun = this.set.add(
    new Gauge(
      "wharf_scrub_last_run_timestamp_seconds",
      "When the last scrub run in this process finished",
      [],
    ),
  );

  readonly scrubDuration = this.set.add(
    new Gauge("wharf_scrub_duration_seconds", "Duration of the last scrub run in this process", []),
  );

  private readonly integrityFailures = this.set.add(
    new Counter(
      "wharf_integrity_failures_total",
      "Stored objects whose bytes did not match their digest (or checksum) when read here, by object; never served",
      ["object"],
    ),
  );

  private readonly quarantinedTotal = this.set.add(
    new Counter(
      "wharf_quarantined_total",
      "Digests this process took out of serving because their stored bytes did not match, by object",
      ["object"],
    ),
  );

  private readonly quarantinedNow = this.set.add(
    new Gauge(
      "wharf_quarantined_objects",
      "Digests quarantined now: not served until pushed or fetched from an upstream again",
      [],
    ),
  );

  private readonly verifyRuns = this.set.add(
    new Counter("wharf_verify_runs_total", "Verify runs in this process by result", ["result"]),
  );

  private readonly verifyBytes = this.set.add(
    new Counter("wharf_verify_bytes_total", "Stored bytes re-hashed by verify in this process", []),
  );

  private readonly verifyLastPass = this.set.add(
    new Gauge(
      "wharf_verify_last_pass_timestamp_seconds",
      "When the last complete verify pass in this process finished",
      [],
    ),
  );

  constructor(set: InstrumentSet) {
    super(set);
    for (const k of SCRUB_KINDS) this.scrubReclaimed.inc([k], 0);
    for (const r of ["ok", "failed"]) this.scrubRuns.inc([r], 0);
    for (const r of ["complete", "stopped", "failed"]) this.verifyRuns.inc([r], 0);
    this.verifyBytes.inc([], 0);
  }

  /**
   * Integrity figures (lib/storage's counts, read at scrape time) and the quarantined digests
   * now (one bounded KV listing).
   */
  integrityFrom(
    counts: () => {
      failures: ReadonlyMap<string, number>;
      quarantined: ReadonlyMap<string, number>;
    },
    quarantinedNow: () => Promise<number>,
  ): void {
    for (const o of ["manifest", "blob", "index-table"]) this.integrityFailures.inc([o], 0);
    for (const o of ["manifest", "blob"]) this.quarantinedTotal.inc([o], 0);
    this.quarantinedNow.set(0);
    this.quarantinedNow.collect = async () => {
      const c = counts();
      for (const [o, n] of c.failures) this.integrityFailures.series([o]).v = n;
      for (const [o, n] of c.quarantined) this.quarantinedTotal.series([o]).v = n;
      this.quarantinedNow.set(await quarantinedNow());
    };
  }

  /** A verify run ended: `complete` when its pass reached the end. */
  verifyFinished(result: "complete" | "stopped" | "failed", bytes: number): void {
    this.verifyRuns.inc([result]);
    this.verifyBytes.inc([], bytes);
    if (result === "complete") this.verifyLastPass.set(Date.now() / 1000);
  }

  scrubFinished(result: ScrubResult): void {
    this.scrubRuns.inc([result.ok ? "ok" : "failed"]);
    for (const [kind, n] of Object.entries(result.reclaimed)) {
      if (n > 0) this.scrubReclaimed.inc([kind], n);
    }
    this.scrubLastRun.set(Date.now() / 1000);
    this.scrubDuration.set(result.seconds);
  }
}
