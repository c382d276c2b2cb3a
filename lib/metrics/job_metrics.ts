// Background work: the job queues' census, enqueues, claims and outcomes, and the event outbox's
// undelivered webhook calls.
import { Counter, Gauge, Histogram, MetricGroup } from "./instruments.ts";

/** What JobQueues, its runners and the outbox (lib/events) report. */
export class JobMetrics extends MetricGroup {
  private readonly outboxPending = this.set.add(
    new Gauge(
      "wharf_event_outbox_pending",
      "Async webhook deliveries not yet made (due or backing off), per webhook; counted up to 10000",
      ["webhook"],
    ),
  );

  private readonly jobsPending = this.set.add(
    new Gauge("wharf_jobs_pending", "Pending and in-flight jobs per queue (census capped)", [
      "queue",
    ]),
  );

  private readonly jobsFailed = this.set.add(
    new Gauge("wharf_jobs_failed", "Dead-lettered jobs per queue (census capped)", ["queue"]),
  );

  private readonly jobsOldest = this.set.add(
    new Gauge(
      "wharf_jobs_oldest_pending_seconds",
      "How long the earliest pending job of a queue has been due (0: none overdue)",
      ["queue"],
    ),
  );

  private readonly jobsEnqueued = this.set.add(
    new Counter(
      "wharf_jobs_enqueued_total",
      "Enqueue calls per queue; result dedup means a pending job of the lock key existed",
      ["queue", "result"],
    ),
  );

  private readonly jobsClaims = this.set.add(
    new Counter("wharf_jobs_claims_total", "Jobs claimed by workers of this process", ["queue"]),
  );

  private readonly jobsOutcomes = this.set.add(
    new Counter(
      "wharf_jobs_outcomes_total",
      "Finished job runs by outcome (ok, retry, failed = dead-lettered, lost = lease lost)",
      ["queue", "outcome"],
    ),
  );

  private readonly jobsPoisoned = this.set.add(
    new Counter("wharf_jobs_poisoned_total", "Stored values that were not jobs", ["queue"]),
  );

  private readonly jobsDuration = this.set.add(
    new Histogram("wharf_jobs_run_duration_seconds", "Job run time by queue", ["queue"], [
      0.001,
      0.01,
      0.1,
      0.5,
      1,
      5,
      30,
      120,
      600,
    ]),
  );

  /** Job census read at scrape time; `census` bounds its own work. */
  countJobsWith(
    queues: readonly string[],
    census: (q: string) => Promise<{ pending: number; failed: number; oldestDueSecs: number }>,
  ): void {
    this.jobsPending.collect = async () => {
      for (const q of queues) {
        const c = await census(q);
        this.jobsPending.set(c.pending, [q]);
        this.jobsFailed.set(c.failed, [q]);
        this.jobsOldest.set(c.oldestDueSecs, [q]);
      }
    };
  }

  /** Callbacks for JobQueues (enqueue, claim, poison) and its runners (outcome, duration). */
  readonly jobEvents = {
    enqueued: (queue: string, dedup: boolean) =>
      this.jobsEnqueued.inc([queue, dedup ? "dedup" : "new"]),
    claimed: (queue: string) => this.jobsClaims.inc([queue]),
    poisoned: (queue: string) => this.jobsPoisoned.inc([queue]),
    finished: (queue: string, _kind: string, outcome: string, seconds: number) => {
      this.jobsOutcomes.inc([queue, outcome]);
      this.jobsDuration.observe(seconds, [queue]);
    },
  };

  /** Undelivered events per webhook at scrape time (lib/events countOutbox). */
  outboxPendingWith(count: () => Promise<Map<string, number>>): void {
    this.outboxPending.collect = async () => {
      for (const [webhook, n] of await count()) this.outboxPending.set(n, [webhook]);
    };
  }
}
