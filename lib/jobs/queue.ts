// One durable queue over KV records (DESIGN.md Jobs; keys in lib/kv/keys.ts). The records
// are the only truth:
// - pending jobs live under job/<q>/q/<storage key>, ordered by their not-before time;
// - job/<q>/lock/<lock key> points at the one unclaimed pending job of a lock key, so a
//   duplicate enqueue is a no-op; a claim removes the pointer, so a write that happens while
//   its job runs enqueues a fresh one (which re-reads the state the first one may have missed);
// - a claim rewrites the record under a key whose time is its lease's end (versionstamp
//   checked, so one worker wins): a worker killed mid-job leaves a record that becomes due
//   again when the lease runs out, and any worker takes it over;
// - failures back off (exponential, jitter in [d/2, d]) or move to job/<q>/f/<storage key>.
// - a job of a batch (progress.ts) is counted in the commit that settles it: one blind sum.
// Every commit here carries at most 2 checks and 5 mutations.
//
// The parts, one job each: queue_enqueue.ts (adding jobs, making one due now), queue_leases.ts
// (claims, leases, retries with backoff, the failed set, poison) and queue_admin.ts (the admin's
// pages, retry, heal and delete, the counts); JobQueue below is the one object callers hold.
import type { JobQueueConfig, QueueName } from "../config/mod.ts";
import type { PlannedMutation } from "../kv/mod.ts";
import { type EnqueueResult, JobEnqueue, type JobEvents, type JobSpec } from "./queue_enqueue.ts";
import { type Claim, type FailOutcome, JobLeases } from "./queue_leases.ts";
import { type HealOutcome, JobAdmin, type Page } from "./queue_admin.ts";
import type { JobRecord } from "./record.ts";

export {
  ENQUEUE_MUTATIONS,
  type EnqueueResult,
  type JobEvents,
  type JobSpec,
  MAX_LOCK_KEY_CHARS,
  MAX_RECORD_BYTES,
} from "./queue_enqueue.ts";
export { type Claim, type FailOutcome, POISON_TAKEOVERS } from "./queue_leases.ts";
export type { HealOutcome, Page } from "./queue_admin.ts";

export class JobQueue {
  readonly #enqueue: JobEnqueue;
  readonly #leases: JobLeases;
  readonly #admin: JobAdmin;

  constructor(
    kv: Deno.Kv,
    readonly name: QueueName,
    cfg: JobQueueConfig,
    events: JobEvents = {},
    /** called after a commit that made work due (in-process wake-up) */
    wake: () => void = () => {},
    now: () => number = Date.now,
  ) {
    const q = { kv, name, cfg, events, wake, now };
    this.#enqueue = new JobEnqueue(q);
    this.#leases = new JobLeases(q);
    this.#admin = new JobAdmin(q);
  }

  // adding jobs (queue_enqueue.ts)
  /** Adds a job unless one with its lock key is already pending (a counted no-op). */
  enqueue(spec: JobSpec): Promise<EnqueueResult> {
    return this.#enqueue.enqueue(spec);
  }
  /** Adds a job to a caller's commit, blind (`ENQUEUE_MUTATIONS` mutations); returns its key. */
  enqueueInto(op: Deno.AtomicOperation, spec: JobSpec): string {
    return this.#enqueue.enqueueInto(op, spec);
  }
  /** `enqueueInto` as planned mutations, for commits built with a CommitBudget. */
  plan(spec: JobSpec): PlannedMutation[] {
    return this.#enqueue.plan(spec);
  }
  /** Call after committing `enqueueInto`: counts it and wakes local workers. */
  committed(count = 1): void {
    this.#enqueue.committed(count);
  }
  /** Makes a waiting (unclaimed) job due now; false when it is gone or already running. */
  expedite(sk: string): Promise<boolean> {
    return this.#enqueue.expedite(sk);
  }

  // claims and leases (queue_leases.ts)
  /** Claims up to `limit` due jobs for `holder`. */
  claim(holder: string, limit: number): Promise<Claim[]> {
    return this.#leases.claim(holder, limit);
  }
  /** Extends a claim's lease; false when the job was taken over or deleted meanwhile. */
  renew(c: Claim): Promise<boolean> {
    return this.#leases.renew(c);
  }
  /** The job succeeded: its record goes away (false: it was no longer ours). */
  complete(c: Claim): Promise<boolean> {
    return this.#leases.complete(c);
  }
  /** The job failed: back off and retry, or dead-letter when permanent or out of attempts. */
  fail(c: Claim, error: unknown, permanent: boolean): Promise<FailOutcome> {
    return this.#leases.fail(c, error, permanent);
  }
  /** Delay before attempt `attempts + 1`: exponential from backoff_min_ms, jitter in [d/2, d]. */
  backoff(attempts: number): number {
    return this.#leases.backoff(attempts);
  }

  // the admin's side and the census (queue_admin.ts)
  listPending(after: string | null, n: number): Promise<Page> {
    return this.#admin.listPending(after, n);
  }
  listFailed(after: string | null, n: number): Promise<Page> {
    return this.#admin.listFailed(after, n);
  }
  /** Failed → pending with attempts reset; false when the key does not exist. */
  retryFailed(sk: string): Promise<boolean> {
    return this.#admin.retryFailed(sk);
  }
  /** `retryFailed` after a machine failure, at most `max` times in the job's life. */
  healFailed(sk: string, max: number): Promise<HealOutcome> {
    return this.#admin.healFailed(sk, max);
  }
  deleteFailed(sk: string): Promise<boolean> {
    return this.#admin.deleteFailed(sk);
  }
  /** Removes a pending (or in-flight: its worker then loses it) job and its lock pointer. */
  deletePending(sk: string): Promise<boolean> {
    return this.#admin.deletePending(sk);
  }
  /** Up to `limit` pending records in due order (metrics derive per-target lag from them). */
  pendingRecords(limit: number): Promise<JobRecord[]> {
    return this.#admin.pendingRecords(limit);
  }
  /** Pending and failed counts (each capped at `cap`) and the oldest due job's lag in seconds. */
  counts(cap = 100_000): Promise<{ pending: number; failed: number; oldestDueSecs: number }> {
    return this.#admin.counts(cap);
  }
}
