// The admin's side of a queue and its census (queue.ts): pages of pending and failed jobs, a
// failed job retried (by an admin) or healed (by a pass after a machine failure), a pending or
// failed job deleted, and the counts and pending records the metrics read.
import { commitWithRetry, K } from "../kv/mod.ts";
import { NotAJobError } from "./errors.ts";
import { countBatchJob } from "./progress.ts";
import {
  failedKey,
  type JobRecord,
  type JobView,
  lockKey,
  parseRecord,
  pendingKey,
  storageKey,
  toView,
} from "./record.ts";
import type { QueueContext } from "./queue_enqueue.ts";

/** healFailed: moved back to pending, left (healed `max` times already), or no such record. */
export type HealOutcome = "healed" | "exhausted" | "gone";

export interface Page {
  items: JobView[];
  next?: string;
}

export class JobAdmin {
  constructor(private readonly q: QueueContext) {}

  listPending(after: string | null, n: number): Promise<Page> {
    return this.page("pending", after, n);
  }

  listFailed(after: string | null, n: number): Promise<Page> {
    return this.page("failed", after, n);
  }

  private async page(set: "pending" | "failed", after: string | null, n: number): Promise<Page> {
    const prefix: Deno.KvKey = set === "pending"
      ? K.jobsPending(this.q.name)
      : K.jobsFailed(this.q.name);
    const selector: Deno.KvListSelector = after === null
      ? { prefix }
      : { prefix, start: [...prefix, after + "\0"] };
    const items: JobView[] = [];
    let more = false;
    if (n > 0) {
      for await (
        const e of this.q.kv.list(selector, { limit: n + 1, batchSize: Math.min(n + 1, 500) })
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
    const { kv, name } = this.q;
    const fk = failedKey(name, sk);
    const retried = await commitWithRetry<boolean>("jobs.retry_failed", async () => {
      const f = await kv.get<unknown>(fk);
      if (f.value === null) return { done: false };
      const rec = parseRecord(f.value);
      if (!rec) {
        // A poison record has nothing to run: retrying it can only fail again.
        throw new NotAJobError(`${sk} is not a job record: it can be deleted, not retried`);
      }
      const { failed_at: _f, holder: _h, ...rest } = rec;
      const nk = storageKey(this.q.now(), rec.id);
      const op = kv.atomic().check(f).delete(fk)
        .set(pendingKey(name, nk), { ...rest, attempts: 0 })
        .set(lockKey(name, rec.lock_key), { key: nk });
      countBatchJob(op, rec.batch, "failed", true);
      return { op, value: true };
    }, { exhausted: () => new Error(`retry on ${name}: ${sk} kept changing`) });
    if (retried) this.q.wake();
    return retried;
  }

  /**
   * `retryFailed` for a job that failed for a machine reason (a heal pass, once the machine may
   * be fixed): at most `max` times in the job's life, counted in its record, so one that fails
   * so again and again stays failed. A poison record is "exhausted".
   */
  async healFailed(sk: string, max: number): Promise<HealOutcome> {
    const { kv, name } = this.q;
    const fk = failedKey(name, sk);
    const r = await commitWithRetry<HealOutcome>("jobs.heal_failed", async () => {
      const f = await kv.get<unknown>(fk);
      if (f.value === null) return { done: "gone" };
      const rec = parseRecord(f.value);
      if (!rec || (rec.heals ?? 0) >= max) return { done: "exhausted" };
      const { failed_at: _f, holder: _h, ...rest } = rec;
      const nk = storageKey(this.q.now(), rec.id);
      const op = kv.atomic().check(f).delete(fk)
        .set(pendingKey(name, nk), { ...rest, attempts: 0, heals: (rec.heals ?? 0) + 1 })
        .set(lockKey(name, rec.lock_key), { key: nk });
      countBatchJob(op, rec.batch, "failed", true);
      return { op, value: "healed" };
    }, { otherwise: () => "gone" });
    if (r === "healed") this.q.wake();
    return r;
  }

  async deleteFailed(sk: string): Promise<boolean> {
    const fk = failedKey(this.q.name, sk);
    const f = await this.q.kv.get(fk);
    if (f.value === null) return false;
    await this.q.kv.atomic().check(f).delete(fk).commit();
    return true;
  }

  /** Removes a pending (or in-flight: its worker then loses it) job and its lock pointer. */
  async deletePending(sk: string): Promise<boolean> {
    const { kv, name } = this.q;
    const pk = pendingKey(name, sk);
    return await commitWithRetry<boolean>("jobs.delete_pending", async () => {
      const p = await kv.get<unknown>(pk);
      if (p.value === null) return { done: false };
      const rec = parseRecord(p.value);
      const op = kv.atomic().check(p).delete(pk);
      // An admin's delete settles it for its batch: nothing is left to wait for.
      if (rec) countBatchJob(op, rec.batch, "done");
      if (rec) {
        const lk = lockKey(name, rec.lock_key);
        const lock = await kv.get<{ key: string }>(lk);
        op.check(lock);
        if (lock.value?.key === sk) op.delete(lk);
      }
      return { op, value: true };
    }, { exhausted: () => new Error(`delete on ${name}: ${sk} kept changing`) });
  }

  /** Up to `limit` pending records in due order (metrics derive per-target lag from them). */
  async pendingRecords(limit: number): Promise<JobRecord[]> {
    const out: JobRecord[] = [];
    for await (
      const e of this.q.kv.list({ prefix: K.jobsPending(this.q.name) }, { limit, batchSize: 500 })
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
        const _ of this.q.kv.list({ prefix }, {
          limit: cap,
          batchSize: 1000,
        })
      ) n++;
      return n;
    };
    let oldestDueSecs = 0;
    for await (const e of this.q.kv.list({ prefix: K.jobsPending(this.q.name) }, { limit: 1 })) {
      const t = parseInt(String(e.key[3]).slice(0, 16), 16);
      if (Number.isFinite(t)) oldestDueSecs = Math.max(0, (this.q.now() - t) / 1000);
    }
    return {
      pending: await count(K.jobsPending(this.q.name)),
      failed: await count(K.jobsFailed(this.q.name)),
      oldestDueSecs,
    };
  }
}
