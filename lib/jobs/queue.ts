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
import type { JobQueueConfig, QueueName } from "../config/mod.ts";
import { commitWithRetry, K, type PlannedMutation, valueSize } from "../kv/mod.ts";
import { JobTooLargeError, NotAJobError } from "./errors.ts";
import { countBatchJob } from "./progress.ts";
import {
  dueEnd,
  errorText,
  failedKey,
  isStorageKey,
  type JobBatch,
  type JobRecord,
  type JobView,
  lockKey,
  parseRecord,
  pendingKey,
  storageKey,
  toView,
} from "./record.ts";

export interface JobSpec {
  kind: string;
  payload: unknown;
  /** one pending job per lock key */
  lockKey: string;
  /** earliest run time, ms since the epoch (default now) */
  notBefore?: number;
  maxAttempts?: number;
  /** the run it counts toward (Runs.start's tracker.batch) */
  batch?: JobBatch;
}

export interface EnqueueResult {
  /** false: a pending job with the same lock key already existed (nothing written) */
  enqueued: boolean;
  storageKey: string;
}

/** A job a worker holds. `key`/`versionstamp` follow each lease renewal. */
export interface Claim {
  queue: QueueName;
  key: string;
  versionstamp: string;
  record: JobRecord;
}

export type FailOutcome = "retry" | "failed" | "lost";

/** healFailed: moved back to pending, left (healed `max` times already), or no such record. */
export type HealOutcome = "healed" | "exhausted" | "gone";

export interface JobEvents {
  enqueued?(queue: QueueName, dedup: boolean): void;
  claimed?(queue: QueueName): void;
  /** a record that was not a job, moved to the failed set */
  poisoned?(queue: QueueName): void;
}

export interface Page {
  items: JobView[];
  next?: string;
}

/** Mutations `enqueueInto` adds to a caller's commit. */
export const ENQUEUE_MUTATIONS = 2;
/** A record is one KV value: keep well under the 64 KiB limit. */
export const MAX_RECORD_BYTES = 60 * 1024;
/** A lock key is part of a KV key (2 KiB limit). */
export const MAX_LOCK_KEY_CHARS = 1024;

/** Queues whose jobs parse pushed content (sandboxed, but the backstop stays). */
const UNTRUSTED_QUEUES: ReadonlySet<QueueName> = new Set(["index", "scan"]);
/** Lease expiries (worker deaths) after which such a job is poison. */
export const POISON_TAKEOVERS = 2;

export class JobQueue {
  constructor(
    private readonly kv: Deno.Kv,
    readonly name: QueueName,
    private readonly cfg: JobQueueConfig,
    private readonly events: JobEvents = {},
    /** called after a commit that made work due (in-process wake-up) */
    private readonly wake: () => void = () => {},
    private readonly now: () => number = Date.now,
  ) {}

  private record(spec: JobSpec): JobRecord {
    if (spec.lockKey.length > MAX_LOCK_KEY_CHARS) {
      throw new JobTooLargeError(`lock key longer than ${MAX_LOCK_KEY_CHARS} characters`);
    }
    const r: JobRecord = {
      id: crypto.randomUUID(),
      kind: spec.kind,
      payload: spec.payload,
      lock_key: spec.lockKey,
      attempts: 0,
      max_attempts: spec.maxAttempts ?? this.cfg.maxAttempts,
      created_at: this.now(),
      ...(spec.batch ? { batch: spec.batch } : {}),
    };
    if (valueSize(r) > MAX_RECORD_BYTES) {
      throw new JobTooLargeError(`job ${spec.kind} is larger than ${MAX_RECORD_BYTES} bytes`);
    }
    return r;
  }

  /** Adds a job unless one with its lock key is already pending (a counted no-op). */
  async enqueue(spec: JobSpec): Promise<EnqueueResult> {
    const lk = lockKey(this.name, spec.lockKey);
    const r = await commitWithRetry<EnqueueResult>("jobs.enqueue", async () => {
      const lock = await this.kv.get<{ key: string }>(lk);
      if (lock.value) {
        const held = await this.kv.get(pendingKey(this.name, lock.value.key));
        if (held.value !== null) return { done: { enqueued: false, storageKey: lock.value.key } };
      }
      const rec = this.record(spec);
      const sk = storageKey(spec.notBefore ?? this.now(), rec.id);
      const op = this.kv.atomic().check(lock)
        .set(pendingKey(this.name, sk), rec)
        .set(lk, { key: sk });
      return { op, value: { enqueued: true, storageKey: sk } };
    }, {
      exhausted: () => new Error(`enqueue on ${this.name}: lock key ${spec.lockKey} kept changing`),
    });
    this.events.enqueued?.(this.name, !r.enqueued);
    if (r.enqueued) this.wake();
    return r;
  }

  /**
   * Adds a job to a caller's commit (the write that causes it), blind: no read, no check,
   * `ENQUEUE_MUTATIONS` mutations. An older pending job of the same lock key is superseded:
   * the pointer moves to the new one and a claim drops the old one.
   */
  enqueueInto(op: Deno.AtomicOperation, spec: JobSpec): string {
    const rec = this.record(spec);
    const sk = storageKey(spec.notBefore ?? this.now(), rec.id);
    op.set(pendingKey(this.name, sk), rec).set(lockKey(this.name, spec.lockKey), { key: sk });
    return sk;
  }

  /**
   * `enqueueInto` as planned mutations, for commits built with a CommitBudget (the metadata
   * layer adds them next to the write that causes the job).
   */
  plan(spec: JobSpec): PlannedMutation[] {
    const rec = this.record(spec);
    const sk = storageKey(spec.notBefore ?? this.now(), rec.id);
    return [
      { kind: "set", key: pendingKey(this.name, sk), value: rec },
      { kind: "set", key: lockKey(this.name, spec.lockKey), value: { key: sk } },
    ];
  }

  /** Call after committing `enqueueInto`: counts it and wakes local workers. */
  committed(count = 1): void {
    for (let i = 0; i < count; i++) this.events.enqueued?.(this.name, false);
    this.wake();
  }

  /** Claims up to `limit` due jobs for `holder`. */
  async claim(holder: string, limit: number): Promise<Claim[]> {
    if (limit <= 0) return [];
    const now = this.now();
    const out: Claim[] = [];
    const iter = this.kv.list<unknown>(
      { prefix: K.jobsPending(this.name), end: dueEnd(this.name, now) },
      { limit: limit * 4 + 4 },
    );
    for await (const e of iter) {
      if (out.length >= limit) break;
      const sk = e.key[3] as string;
      const rec = parseRecord(e.value);
      if (!rec || !isStorageKey(sk)) {
        await this.poison(e);
        continue;
      }
      const c = await this.claimOne(holder, sk, e.versionstamp, rec, now);
      if (c) out.push(c);
    }
    return out;
  }

  private async claimOne(
    holder: string,
    sk: string,
    vs: string,
    rec: JobRecord,
    now: number,
  ): Promise<Claim | null> {
    const pk = pendingKey(this.name, sk);
    const lk = lockKey(this.name, rec.lock_key);
    const lock = await this.kv.get<{ key: string }>(lk);
    if (lock.value?.key !== sk) {
      // An unleased record is always what its lock key points at, unless a newer job of the
      // same lock key replaced it (enqueueInto); a taken-over lease yields to a pending one.
      // Either way the newer job re-reads the state and does this one's work.
      const superseded = rec.holder === undefined ||
        (lock.value !== null &&
          (await this.kv.get(pendingKey(this.name, lock.value.key))).value !== null);
      if (superseded) {
        const op = this.kv.atomic().check({ key: pk, versionstamp: vs }).delete(pk);
        countBatchJob(op, rec.batch, "done"); // the newer job does its work
        await op.commit();
        return null;
      }
    }
    if (rec.attempts >= rec.max_attempts) {
      // Claimed max_attempts times and never finished: its workers died mid-run.
      await this.toFailed(sk, vs, rec, `lease expired ${rec.attempts} times (worker died?)`);
      return null;
    }
    // A held record that is due again is a lease that ran out: its worker died mid-run.
    const takeovers = (rec.takeovers ?? 0) + (rec.holder !== undefined ? 1 : 0);
    if (takeovers >= POISON_TAKEOVERS && UNTRUSTED_QUEUES.has(this.name)) {
      // Jobs that parse pushed content: one death may be a restart (kill -9, a deploy), a
      // second one while holding the same job is the job itself. Running it again would take
      // the process down again (a crash loop in which nothing is served).
      await this.toFailed(
        sk,
        vs,
        rec,
        `poison: its worker died ${takeovers} times while running it; not retried`,
      );
      return null;
    }
    const next: JobRecord = {
      ...rec,
      attempts: rec.attempts + 1,
      holder,
      ...(takeovers ? { takeovers } : {}),
    };
    const nk = storageKey(now + this.cfg.leaseSecs * 1000, rec.id);
    const op = this.kv.atomic().check({ key: pk, versionstamp: vs }).check(lock)
      .delete(pk).set(pendingKey(this.name, nk), next);
    if (lock.value) op.delete(lk);
    const res = await op.commit();
    if (!res.ok) return null; // another worker won it
    this.events.claimed?.(this.name);
    return { queue: this.name, key: nk, versionstamp: res.versionstamp, record: next };
  }

  /** Extends a claim's lease; false when the job was taken over or deleted meanwhile. */
  async renew(c: Claim): Promise<boolean> {
    const pk = pendingKey(this.name, c.key);
    const nk = storageKey(this.now() + this.cfg.leaseSecs * 1000, c.record.id);
    const op = this.kv.atomic().check({ key: pk, versionstamp: c.versionstamp });
    if (nk !== c.key) op.delete(pk);
    const res = await op.set(pendingKey(this.name, nk), c.record).commit();
    if (!res.ok) return false;
    c.key = nk;
    c.versionstamp = res.versionstamp;
    return true;
  }

  /** The job succeeded: its record goes away (false: it was no longer ours). */
  async complete(c: Claim): Promise<boolean> {
    const pk = pendingKey(this.name, c.key);
    const op = this.kv.atomic().check({ key: pk, versionstamp: c.versionstamp }).delete(pk);
    countBatchJob(op, c.record.batch, "done");
    return (await op.commit()).ok;
  }

  /** The job failed: back off and retry, or dead-letter when permanent or out of attempts. */
  async fail(c: Claim, error: unknown, permanent: boolean): Promise<FailOutcome> {
    const rec = c.record;
    const msg = errorText(error);
    if (permanent || rec.attempts >= rec.max_attempts) {
      return await this.toFailed(c.key, c.versionstamp, rec, msg) ? "failed" : "lost";
    }
    const pk = pendingKey(this.name, c.key);
    const lk = lockKey(this.name, rec.lock_key);
    return await commitWithRetry<FailOutcome>("jobs.fail", async (n) => {
      // A conflict on our own record (not on the lock) means another worker took the job over.
      if (n > 0 && (await this.kv.get(pk)).versionstamp !== c.versionstamp) return { done: "lost" };
      const lock = await this.kv.get<{ key: string }>(lk);
      const op = this.kv.atomic().check({ key: pk, versionstamp: c.versionstamp }).check(lock)
        .delete(pk);
      let superseded = false;
      if (lock.value && lock.value.key !== c.key) {
        superseded = (await this.kv.get(pendingKey(this.name, lock.value.key))).value !== null;
      }
      if (!superseded) {
        const { holder: _, ...rest } = rec;
        const nk = storageKey(this.now() + this.backoff(rec.attempts), rec.id);
        op.set(pendingKey(this.name, nk), { ...rest, last_error: msg }).set(lk, { key: nk });
      }
      return { op, value: "retry" };
    }, { otherwise: () => "lost" });
  }

  /** Delay before attempt `attempts + 1`: exponential from backoff_min_ms, jitter in [d/2, d]. */
  backoff(attempts: number): number {
    const exp = Math.min(30, Math.max(0, attempts - 1));
    const d = Math.min(this.cfg.backoffMaxMs, this.cfg.backoffMinMs * 2 ** exp);
    return Math.round(d / 2 + Math.random() * d / 2);
  }

  private async toFailed(sk: string, vs: string, rec: JobRecord, msg: string): Promise<boolean> {
    const { holder: _, ...rest } = rec;
    const at = this.now();
    const failed: JobRecord = { ...rest, last_error: msg, failed_at: at };
    const pk = pendingKey(this.name, sk);
    const op = this.kv.atomic().check({ key: pk, versionstamp: vs }).delete(pk)
      .set(failedKey(this.name, storageKey(at, rec.id)), failed);
    countBatchJob(op, rec.batch, "failed");
    return (await op.commit()).ok;
  }

  /** A pending value that is not a job: kept for inspection in the failed set, never run. */
  private async poison(e: Deno.KvEntry<unknown>): Promise<void> {
    const sk = String(e.key[3]);
    const at = this.now();
    const id = crypto.randomUUID();
    const v = e.value && typeof e.value === "object" ? e.value as Record<string, unknown> : {};
    const failed = {
      id,
      kind: typeof v.kind === "string" ? v.kind.slice(0, 200) : "unknown",
      payload: null,
      lock_key: typeof v.lock_key === "string" ? v.lock_key.slice(0, 1024) : "",
      attempts: 0,
      max_attempts: 0,
      created_at: at,
      failed_at: at,
      last_error: `malformed job record under pending key ${sk.slice(0, 200)}`,
    };
    const res = await this.kv.atomic().check(e).delete(e.key)
      .set(failedKey(this.name, storageKey(at, id)), failed).commit();
    if (res.ok) this.events.poisoned?.(this.name);
  }

  /**
   * Makes a waiting (unclaimed) job due now, e.g. when the work it insures against just
   * failed in the foreground. False when it is gone or already running.
   */
  async expedite(sk: string): Promise<boolean> {
    const pk = pendingKey(this.name, sk);
    const r = await commitWithRetry<"moved" | "due" | "gone">("jobs.expedite", async () => {
      const p = await this.kv.get<unknown>(pk);
      const rec = parseRecord(p.value);
      if (!rec || rec.holder !== undefined) return { done: "gone" };
      const nk = storageKey(this.now(), rec.id);
      if (nk >= sk) return { done: "due" };
      const lk = lockKey(this.name, rec.lock_key);
      const lock = await this.kv.get<{ key: string }>(lk);
      const op = this.kv.atomic().check(p).check(lock).delete(pk)
        .set(pendingKey(this.name, nk), rec);
      if (lock.value?.key === sk) op.set(lk, { key: nk });
      return { op, value: "moved" };
    }, { otherwise: () => "gone" });
    if (r === "moved") this.wake();
    return r !== "gone";
  }

  // --- admin -------------------------------------------------------------------------------

  listPending(after: string | null, n: number): Promise<Page> {
    return this.page("pending", after, n);
  }

  listFailed(after: string | null, n: number): Promise<Page> {
    return this.page("failed", after, n);
  }

  private async page(set: "pending" | "failed", after: string | null, n: number): Promise<Page> {
    const prefix: Deno.KvKey = set === "pending"
      ? K.jobsPending(this.name)
      : K.jobsFailed(this.name);
    const selector: Deno.KvListSelector = after === null
      ? { prefix }
      : { prefix, start: [...prefix, after + "\0"] };
    const items: JobView[] = [];
    let more = false;
    if (n > 0) {
      for await (
        const e of this.kv.list(selector, { limit: n + 1, batchSize: Math.min(n + 1, 500) })
      ) {
        if (items.length === n) {
          more = true;
          break;
        }
        items.push(toView(String(e.key[3]), e.value, set));
      }
    }
    const page: Page = { items };
    if (more) page.next = items[items.length - 1].storage_key;
    return page;
  }

  /** Failed → pending with attempts reset; false when the key does not exist. */
  async retryFailed(sk: string): Promise<boolean> {
    const fk = failedKey(this.name, sk);
    const retried = await commitWithRetry<boolean>("jobs.retry_failed", async () => {
      const f = await this.kv.get<unknown>(fk);
      if (f.value === null) return { done: false };
      const rec = parseRecord(f.value);
      if (!rec) {
        // A poison record has nothing to run: retrying it can only fail again.
        throw new NotAJobError(`${sk} is not a job record: it can be deleted, not retried`);
      }
      const { failed_at: _f, holder: _h, ...rest } = rec;
      const nk = storageKey(this.now(), rec.id);
      const op = this.kv.atomic().check(f).delete(fk)
        .set(pendingKey(this.name, nk), { ...rest, attempts: 0 })
        .set(lockKey(this.name, rec.lock_key), { key: nk });
      countBatchJob(op, rec.batch, "failed", true);
      return { op, value: true };
    }, { exhausted: () => new Error(`retry on ${this.name}: ${sk} kept changing`) });
    if (retried) this.wake();
    return retried;
  }

  /**
   * `retryFailed` for a job that failed for a machine reason (a heal pass, once the machine may
   * be fixed): at most `max` times in the job's life, counted in its record, so one that fails
   * so again and again stays failed. A poison record is "exhausted".
   */
  async healFailed(sk: string, max: number): Promise<HealOutcome> {
    const fk = failedKey(this.name, sk);
    const r = await commitWithRetry<HealOutcome>("jobs.heal_failed", async () => {
      const f = await this.kv.get<unknown>(fk);
      if (f.value === null) return { done: "gone" };
      const rec = parseRecord(f.value);
      if (!rec || (rec.heals ?? 0) >= max) return { done: "exhausted" };
      const { failed_at: _f, holder: _h, ...rest } = rec;
      const nk = storageKey(this.now(), rec.id);
      const op = this.kv.atomic().check(f).delete(fk)
        .set(pendingKey(this.name, nk), { ...rest, attempts: 0, heals: (rec.heals ?? 0) + 1 })
        .set(lockKey(this.name, rec.lock_key), { key: nk });
      countBatchJob(op, rec.batch, "failed", true);
      return { op, value: "healed" };
    }, { otherwise: () => "gone" });
    if (r === "healed") this.wake();
    return r;
  }

  async deleteFailed(sk: string): Promise<boolean> {
    const fk = failedKey(this.name, sk);
    const f = await this.kv.get(fk);
    if (f.value === null) return false;
    await this.kv.atomic().check(f).delete(fk).commit();
    return true;
  }

  /** Removes a pending (or in-flight: its worker then loses it) job and its lock pointer. */
  async deletePending(sk: string): Promise<boolean> {
    const pk = pendingKey(this.name, sk);
    return await commitWithRetry<boolean>("jobs.delete_pending", async () => {
      const p = await this.kv.get<unknown>(pk);
      if (p.value === null) return { done: false };
      const rec = parseRecord(p.value);
      const op = this.kv.atomic().check(p).delete(pk);
      // An admin's delete settles it for its batch: nothing is left to wait for.
      if (rec) countBatchJob(op, rec.batch, "done");
      if (rec) {
        const lk = lockKey(this.name, rec.lock_key);
        const lock = await this.kv.get<{ key: string }>(lk);
        op.check(lock);
        if (lock.value?.key === sk) op.delete(lk);
      }
      return { op, value: true };
    }, { exhausted: () => new Error(`delete on ${this.name}: ${sk} kept changing`) });
  }

  /** Up to `limit` pending records in due order (metrics derive per-target lag from them). */
  async pendingRecords(limit: number): Promise<JobRecord[]> {
    const out: JobRecord[] = [];
    for await (
      const e of this.kv.list({ prefix: K.jobsPending(this.name) }, { limit, batchSize: 500 })
    ) {
      const r = parseRecord(e.value);
      if (r) out.push(r);
    }
    return out;
  }

  /** Pending and failed counts (each capped at `cap`) and the oldest due job's lag in seconds. */
  async counts(cap = 100_000): Promise<{ pending: number; failed: number; oldestDueSecs: number }> {
    const count = async (prefix: Deno.KvKey) => {
      let n = 0;
      for await (
        const _ of this.kv.list({ prefix }, {
          limit: cap,
          batchSize: 1000,
        })
      ) n++;
      return n;
    };
    let oldestDueSecs = 0;
    for await (const e of this.kv.list({ prefix: K.jobsPending(this.name) }, { limit: 1 })) {
      const t = parseInt(String(e.key[3]).slice(0, 16), 16);
      if (Number.isFinite(t)) oldestDueSecs = Math.max(0, (this.now() - t) / 1000);
    }
    return {
      pending: await count(K.jobsPending(this.name)),
      failed: await count(K.jobsFailed(this.name)),
      oldestDueSecs,
    };
  }
}
