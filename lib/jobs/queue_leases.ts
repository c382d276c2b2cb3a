// Claiming and leases (queue.ts): a worker claims due jobs by rewriting each record under a key
// whose time is its lease's end, renews the lease while it runs, and settles the job: done, a
// retry after a backoff, or the failed set (out of attempts, permanent, or poison: its workers
// kept dying while holding it).
import type { QueueName } from "../config/mod.ts";
import { commitWithRetry, K } from "../kv/mod.ts";
import { countBatchJob } from "./progress.ts";
import {
  dueEnd,
  errorText,
  failedKey,
  isStorageKey,
  type JobRecord,
  lockKey,
  parseRecord,
  pendingKey,
  storageKey,
} from "./record.ts";
import type { QueueContext } from "./queue_enqueue.ts";

/** A job a worker holds. `key`/`versionstamp` follow each lease renewal. */
export interface Claim {
  queue: QueueName;
  key: string;
  versionstamp: string;
  record: JobRecord;
}

export type FailOutcome = "retry" | "failed" | "lost";

/** Queues whose jobs parse pushed content (sandboxed, but the backstop stays). */
const UNTRUSTED_QUEUES: ReadonlySet<QueueName> = new Set(["index", "scan"]);
/** Lease expiries (worker deaths) after which such a job is poison. */
export const POISON_TAKEOVERS = 2;

export class JobLeases {
  constructor(private readonly q: QueueContext) {}

  /** Claims up to `limit` due jobs for `holder`. */
  async claim(holder: string, limit: number): Promise<Claim[]> {
    if (limit <= 0) return [];
    const now = this.q.now();
    const out: Claim[] = [];
    const iter = this.q.kv.list<unknown>(
      { prefix: K.jobsPending(this.q.name), end: dueEnd(this.q.name, now) },
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
    const { kv, name } = this.q;
    const pk = pendingKey(name, sk);
    const lk = lockKey(name, rec.lock_key);
    const lock = await kv.get<{ key: string }>(lk);
    if (lock.value?.key !== sk) {
      // An unleased record is always what its lock key points at, unless a newer job of the
      // same lock key replaced it (enqueueInto); a taken-over lease yields to a pending one.
      // Either way the newer job re-reads the state and does this one's work.
      const superseded = rec.holder === undefined ||
        (lock.value !== null &&
          (await kv.get(pendingKey(name, lock.value.key))).value !== null);
      if (superseded) {
        const op = kv.atomic().check({ key: pk, versionstamp: vs }).delete(pk);
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
    if (takeovers >= POISON_TAKEOVERS && UNTRUSTED_QUEUES.has(name)) {
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
    const nk = storageKey(now + this.q.cfg.leaseSecs * 1000, rec.id);
    const op = kv.atomic().check({ key: pk, versionstamp: vs }).check(lock)
      .delete(pk).set(pendingKey(name, nk), next);
    if (lock.value) op.delete(lk);
    const res = await op.commit();
    if (!res.ok) return null; // another worker won it
    this.q.events.claimed?.(name);
    return { queue: name, key: nk, versionstamp: res.versionstamp, record: next };
  }

  /** Extends a claim's lease; false when the job was taken over or deleted meanwhile. */
  async renew(c: Claim): Promise<boolean> {
    const pk = pendingKey(this.q.name, c.key);
    const nk = storageKey(this.q.now() + this.q.cfg.leaseSecs * 1000, c.record.id);
    const op = this.q.kv.atomic().check({ key: pk, versionstamp: c.versionstamp });
    if (nk !== c.key) op.delete(pk);
    const res = await op.set(pendingKey(this.q.name, nk), c.record).commit();
    if (!res.ok) return false;
    c.key = nk;
    c.versionstamp = res.versionstamp;
    return true;
  }

  /** The job succeeded: its record goes away (false: it was no longer ours). */
  async complete(c: Claim): Promise<boolean> {
    const pk = pendingKey(this.q.name, c.key);
    const op = this.q.kv.atomic().check({ key: pk, versionstamp: c.versionstamp }).delete(pk);
    countBatchJob(op, c.record.batch, "done");
    return (await op.commit()).ok;
  }

  /** The job failed: back off and retry, or dead-letter when permanent or out of attempts. */
  async fail(c: Claim, error: unknown, permanent: boolean): Promise<FailOutcome> {
    const { kv, name } = this.q;
    const rec = c.record;
    const msg = errorText(error);
    if (permanent || rec.attempts >= rec.max_attempts) {
      return await this.toFailed(c.key, c.versionstamp, rec, msg) ? "failed" : "lost";
    }
    const pk = pendingKey(name, c.key);
    const lk = lockKey(name, rec.lock_key);
    return await commitWithRetry<FailOutcome>("jobs.fail", async (n) => {
      // A conflict on our own record (not on the lock) means another worker took the job over.
      if (n > 0 && (await kv.get(pk)).versionstamp !== c.versionstamp) return { done: "lost" };
      const lock = await kv.get<{ key: string }>(lk);
      const op = kv.atomic().check({ key: pk, versionstamp: c.versionstamp }).check(lock)
        .delete(pk);
      let superseded = false;
      if (lock.value && lock.value.key !== c.key) {
        superseded = (await kv.get(pendingKey(name, lock.value.key))).value !== null;
      }
      if (!superseded) {
        const { holder: _, ...rest } = rec;
        const nk = storageKey(this.q.now() + this.backoff(rec.attempts), rec.id);
        op.set(pendingKey(name, nk), { ...rest, last_error: msg }).set(lk, { key: nk });
      }
      return { op, value: "retry" };
    }, { otherwise: () => "lost" });
  }

  /** Delay before attempt `attempts + 1`: exponential from backoff_min_ms, jitter in [d/2, d]. */
  backoff(attempts: number): number {
    const exp = Math.min(30, Math.max(0, attempts - 1));
    const d = Math.min(this.q.cfg.backoffMaxMs, this.q.cfg.backoffMinMs * 2 ** exp);
    return Math.round(d / 2 + Math.random() * d / 2);
  }

  private async toFailed(sk: string, vs: string, rec: JobRecord, msg: string): Promise<boolean> {
    const { holder: _, ...rest } = rec;
    const at = this.q.now();
    const failed: JobRecord = { ...rest, last_error: msg, failed_at: at };
    const pk = pendingKey(this.q.name, sk);
    const op = this.q.kv.atomic().check({ key: pk, versionstamp: vs }).delete(pk)
      .set(failedKey(this.q.name, storageKey(at, rec.id)), failed);
    countBatchJob(op, rec.batch, "failed");
    return (await op.commit()).ok;
  }

  /** A pending value that is not a job: kept for inspection in the failed set, never run. */
  private async poison(e: Deno.KvEntry<unknown>): Promise<void> {
    const sk = String(e.key[3]);
    const at = this.q.now();
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
    const res = await this.q.kv.atomic().check(e).delete(e.key)
      .set(failedKey(this.q.name, storageKey(at, id)), failed).commit();
    if (res.ok) this.q.events.poisoned?.(this.q.name);
  }
}
