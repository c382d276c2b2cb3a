// The delivery outbox of async webhooks. A write that causes an event adds one KV entry per
// webhook to its own commit:
//   evq/<webhook>/<storage key>   → OutboxEntry   due at the key's time prefix (storageKey)
// and each webhook's outbox is drained in batches by one process at a time, holding
//   evlease/<webhook>             → {holder, until}   a lease (lib/kv/lease.ts) per batch
// A batch is one bounded `list`, up to `concurrency` deliveries in flight, and one commit that
// removes what was delivered, moves what failed to a later key (exponential backoff with jitter,
// as the job queues do) and turns what ran out of retries into a dead letter of the `events`
// job queue (`/v2/_svc/jobs/failed?queue=events`; a retry there delivers it as a job). So a
// delivery costs a small share of one commit instead of a job's claim and completion commits:
// the point of the outbox (bench/README.md). The entries are the truth: a process killed
// mid-batch leaves them in place and its lease runs out; delivery is at least once.
import type { Config, EventWebhookConfig, JobQueueConfig } from "../config/mod.ts";
import { failedKey, type JobRecord, storageKey } from "../jobs/mod.ts";
import {
  K,
  keepRenewed,
  type LeaseFormat,
  Leases,
  type LeaseState,
  type PlannedMutation,
  renewEvery,
  UNTIL_FORMAT,
} from "../kv/mod.ts";
import { log } from "../log.ts";
import { deliver } from "./deliver.ts";
import type { WharfEvent } from "./event.ts";

export const DELIVER_KIND = "deliver-event";

export interface OutboxEntry {
  id: string;
  webhook: string;
  event: WharfEvent;
  attempts: number;
  max_attempts: number;
  created_at: number;
  last_error?: string;
}

export const outboxKey = (webhook: string, sk: string): Deno.KvKey => K.outbox(webhook, sk);
const leaseKey = (webhook: string): Deno.KvKey => K.outboxLease(webhook);

/** The outbox lease's layout: `{ holder, until }`, released by setting `until` to 0. */
const OUTBOX_LEASE: LeaseFormat<LeaseState> = {
  ...UNTIL_FORMAT,
  released: (holder) => ({ holder, until: 0 }),
};

/** Entries per batch: their deletes and moves stay far below a commit's 1,000 mutations. */
const BATCH = 64;
/** The pause after a batch that was not full, for more entries to gather. */
const GATHER_MS = 25;

export function outboxEntry(
  h: EventWebhookConfig,
  ev: WharfEvent,
  now: number,
): { key: Deno.KvKey; value: OutboxEntry } {
  const id = crypto.randomUUID();
  return {
    key: outboxKey(h.name, storageKey(now, id)),
    value: {
      id,
      webhook: h.name,
      event: ev,
      attempts: 0,
      max_attempts: h.maxRetries + 1,
      created_at: now,
    },
  };
}

export function planEntry(h: EventWebhookConfig, ev: WharfEvent, now: number): PlannedMutation {
  const e = outboxEntry(h, ev, now);
  return { kind: "set", key: e.key, value: e.value };
}

/** The dead letter of an entry, as the jobs admin API lists and retries it. */
export function deadLetter(e: OutboxEntry, error: string, now: number): JobRecord {
  return {
    id: e.id,
    kind: DELIVER_KIND,
    payload: { webhook: e.webhook, event: e.event },
    lock_key: `deliver|${e.event.id}|${e.webhook}`,
    attempts: e.attempts,
    max_attempts: e.max_attempts,
    created_at: e.created_at,
    last_error: error.slice(0, 2000),
    failed_at: now,
  };
}

export class OutboxDrainer {
  private stopped = false;
  private readonly loops = new Map<string, Promise<void>>();
  private readonly wakers = new Set<() => void>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private readonly leases: Leases<LeaseState>;

  constructor(
    private readonly kv: Deno.Kv,
    private readonly cfg: Config,
    private readonly holder: string,
    private readonly now: () => number = Date.now,
  ) {
    this.leases = new Leases(kv, OUTBOX_LEASE, now);
  }

  private get queue(): JobQueueConfig {
    return this.cfg.global.jobQueue;
  }

  /** Drains every async webhook's outbox; webhooks added by a reload are picked up. */
  start(): void {
    if (this.queue.concurrency.events <= 0) return;
    const sync = () => {
      for (const h of this.cfg.eventWebhooks) {
        if (h.policy === "async" && !this.loops.has(h.name)) {
          this.loops.set(h.name, this.drain(h.name));
        }
      }
    };
    sync();
    this.timer = setInterval(sync, 1000);
  }

  /** A local write added entries: drain now instead of at the next poll. */
  wake(): void {
    for (const w of [...this.wakers]) w();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.wake();
    await Promise.all(this.loops.values());
  }

  private async drain(name: string): Promise<void> {
    while (!this.stopped) {
      let found = 0;
      try {
        const hook = this.cfg.eventWebhooks.find((h) => h.name === name && h.policy === "async");
        if (!hook) {
          // Removed by a reload: what is left waits for it to come back.
          this.loops.delete(name);
          return;
        }
        found = await this.batch(hook);
      } catch (e) {
        if (this.stopped) break;
        log.error("event outbox drain failed", { webhook: name, error: String(e) });
      }
      if (found === 0) await this.sleep(this.queue.pollIntervalMs);
      // A part batch under a stream of writes: let entries gather a moment (wakes ignored), so a
      // push burst costs the drainer a few commits a second, not one or two per event.
      else if (found < BATCH) await new Promise((r) => setTimeout(r, GATHER_MS));
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.wakers.delete(done);
        resolve();
      };
      const t = setTimeout(done, ms);
      this.wakers.add(done);
    });
  }

  /**
   * One batch; how many due entries it found (0: nothing to do, look again after the poll
   * interval). The lease is taken for the batch and given back by its commit, so a process
   * killed between batches leaves nothing for the next one to wait out, and one killed mid-batch
   * at most the rest of one `lease_secs` term.
   */
  private async batch(hook: EventWebhookConfig): Promise<number> {
    const now = this.now();
    const end = outboxKey(hook.name, storageKey(now + 1, ""));
    const list = async (limit: number) => {
      const out: Deno.KvEntry<OutboxEntry>[] = [];
      const sel = { prefix: K.outboxOf(hook.name), end };
      for await (const e of this.kv.list<OutboxEntry>(sel, { limit })) out.push(e);
      return out;
    };
    // An idle poll is this one small list, without the lease.
    if ((await list(1)).length === 0) return 0;
    const concurrency = Math.max(1, this.queue.concurrency.events);
    // A term of `lease_secs`, renewed while the batch delivers: a process killed mid-batch holds
    // up the webhook's deliveries for at most that. (A term covering a whole batch at its slowest
    // held them up for ~2 minutes after a crash.)
    const took = await this.leases.take(
      leaseKey(hook.name),
      this.holder,
      this.queue.leaseSecs * 1000,
    );
    if (!took.ok) return 0; // another process drains this webhook
    const lease = took.lease;
    // Listed under the lease: a list from before it may predate the last holder's commit, and
    // delivering from it would repeat what that holder just delivered and deleted.
    const due = await list(BATCH);
    if (due.length === 0) {
      await this.leases.releaseInto(this.kv.atomic(), lease).commit();
      return 0;
    }

    const outcome: (string | null)[] = new Array(due.length).fill(null);
    let next = 0;
    // Renewed, not held through: the commit below releases the lease as last renewed, and lands
    // only if no other process took it meanwhile (then these entries are delivered again).
    const renewal = keepRenewed(() => lease.renew(), renewEvery(lease.ttlMs), {
      name: "event outbox",
      onError: (e) => log.warn("event outbox: lease renewal failed", { error: String(e) }),
    });
    try {
      await Promise.all(Array.from({ length: Math.min(concurrency, due.length) }, async () => {
        for (let i = next++; i < due.length && !renewal.signal.aborted; i = next++) {
          const e = due[i].value;
          try {
            await deliver(hook, JSON.stringify(e.event), e.event.id, e.event.kind);
          } catch (err) {
            outcome[i] = (err as Error).message || "delivery failed";
          }
        }
      }));
    } finally {
      await renewal.stop();
    }
    if (renewal.signal.aborted) {
      // Another process holds the outbox now: what this batch delivered is delivered again.
      log.warn("event outbox: lease lost mid-batch; entries will be delivered again", {
        webhook: hook.name,
      });
      return due.length;
    }

    const op = this.leases.releaseInto(this.kv.atomic(), lease);
    const at = this.now();
    for (let i = 0; i < due.length; i++) {
      // Entries are never rewritten in place and only the lease holder moves them: checking
      // the lease (one check, whatever the batch size) is what keeps this commit exact.
      const { key, value } = due[i];
      op.delete(key);
      const error = outcome[i];
      if (error === null) continue;
      const attempts = value.attempts + 1;
      const sk = key[2] as string;
      if (attempts >= value.max_attempts) {
        op.set(failedKey("events", sk), deadLetter({ ...value, attempts }, error, at));
        log.warn("event delivery dead-lettered", {
          webhook: hook.name,
          event: value.event.id,
          error,
        });
      } else {
        const d = Math.min(
          this.queue.backoffMaxMs,
          this.queue.backoffMinMs * 2 ** (attempts - 1),
        );
        const delay = d / 2 + Math.random() * d / 2;
        op.set(outboxKey(hook.name, storageKey(at + delay, value.id)), {
          ...value,
          attempts,
          last_error: error.slice(0, 2000),
        });
      }
    }
    if (!(await op.commit()).ok) {
      log.warn("event outbox: lease lost mid-batch; entries will be delivered again", {
        webhook: hook.name,
      });
    }
    return due.length;
  }
}

/** Entries waiting per async webhook (at most `cap` counted each): the pending gauge. */
export async function countOutbox(
  kv: Deno.Kv,
  cfg: Config,
  cap = 10_000,
): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const h of cfg.eventWebhooks) {
    if (h.policy !== "async") continue;
    let n = 0;
    for await (const _ of kv.list({ prefix: K.outboxOf(h.name) }, { limit: cap })) n++;
    out.set(h.name, n);
  }
  return out;
}
