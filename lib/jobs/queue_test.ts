// The queue contract on a real KV file, with a controllable clock for leases and backoff.
import * as assert from "node:assert/strict";
import { openTestKv, type TestKv } from "../../tests/helpers/kv.ts";
import type { JobQueueConfig } from "../config/mod.ts";
import { defaultJobQueue } from "../config/mod.ts";
import { JobQueues, NotAJobError } from "./mod.ts";
import { keyTime, pendingKey } from "./record.ts";

const CFG: JobQueueConfig = {
  ...defaultJobQueue(),
  maxAttempts: 3,
  backoffMinMs: 1000,
  backoffMaxMs: 8000,
  leaseSecs: 30,
};

interface Env {
  t: TestKv;
  jobs: JobQueues;
  clock: { now: number };
  events: { enqueued: boolean[]; claimed: number; poisoned: number };
}

async function withQueues(fn: (e: Env) => Promise<void>, cfg = CFG): Promise<void> {
  const t = await openTestKv();
  const clock = { now: Date.UTC(2026, 0, 1) };
  const events = { enqueued: [] as boolean[], claimed: 0, poisoned: 0 };
  const jobs = new JobQueues(t.kv, cfg, {
    enqueued: (_q, dedup) => events.enqueued.push(dedup),
    claimed: () => events.claimed++,
    poisoned: () => events.poisoned++,
  }, () => clock.now);
  try {
    await fn({ t, jobs, clock, events });
    assert.deepEqual(t.violations, []);
  } finally {
    await t.close();
  }
}

const spec = (lockKey: string, payload: unknown = { lockKey }) => ({
  kind: "test",
  payload,
  lockKey,
});

Deno.test("enqueue: one pending job per lock key, a duplicate is a counted no-op", () =>
  withQueues(async ({ jobs, events }) => {
    const q = jobs.queue("cache");
    const a = await q.enqueue(spec("ns@sha256:a"));
    const b = await q.enqueue(spec("ns@sha256:a"));
    const c = await q.enqueue(spec("ns@sha256:b"));
    assert.equal(a.enqueued, true);
    assert.equal(b.enqueued, false);
    assert.equal(b.storageKey, a.storageKey);
    assert.equal(c.enqueued, true);
    assert.deepEqual(events.enqueued, [false, true, false]);
    const page = await q.listPending(null, 100);
    assert.deepEqual(page.items.map((j) => j.lock_key).sort(), ["ns@sha256:a", "ns@sha256:b"]);
    assert.equal(page.next, undefined);
    // Other queues are separate.
    assert.equal((await jobs.queue("replication").enqueue(spec("ns@sha256:a"))).enqueued, true);
  }));

Deno.test("claim: leases the job under its lease-end key; a write during the run enqueues anew", () =>
  withQueues(async ({ jobs, clock, events }) => {
    const q = jobs.queue("cache");
    await q.enqueue(spec("k"));
    const [c] = await q.claim("w1", 5);
    assert.equal(c.record.attempts, 1);
    assert.equal(c.record.holder, "w1");
    assert.equal(keyTime(c.key), clock.now + CFG.leaseSecs * 1000);
    assert.equal(events.claimed, 1);
    assert.deepEqual(await q.claim("w2", 5), [], "leased job is not due");
    // The in-flight job no longer holds the lock key: a new write's job is queued.
    assert.equal((await q.enqueue(spec("k"))).enqueued, true);
    const list = await q.listPending(null, 10);
    assert.equal(list.items.length, 2);
    assert.ok(await q.complete(c));
    assert.equal((await q.listPending(null, 10)).items.length, 1);
  }));

Deno.test("claim: exactly one of many concurrent claimers gets each job", () =>
  withQueues(async ({ jobs }) => {
    const q = jobs.queue("index");
    for (let i = 0; i < 20; i++) await q.enqueue(spec(`k${i}`));
    const results = await Promise.all(
      Array.from({ length: 8 }, (_, w) => q.claim(`w${w}`, 20)),
    );
    const ids = results.flat().map((c) => c.record.id);
    assert.equal(ids.length, 20);
    assert.equal(new Set(ids).size, 20);
  }));

Deno.test("lease: an expired lease is taken over; the old holder's writes are refused", () =>
  withQueues(async ({ jobs, clock }) => {
    const q = jobs.queue("cache");
    await q.enqueue(spec("k"));
    const [a] = await q.claim("dead-worker", 1);
    clock.now += 10_000;
    assert.ok(await q.renew(a), "renewal moves the lease end");
    assert.equal(keyTime(a.key), clock.now + CFG.leaseSecs * 1000);
    clock.now += CFG.leaseSecs * 1000 - 1;
    assert.deepEqual(await q.claim("w2", 1), [], "renewed lease still held");
    clock.now += 2;
    const [b] = await q.claim("w2", 1);
    assert.equal(b.record.id, a.record.id);
    assert.equal(b.record.attempts, 2);
    assert.equal(await q.complete(a), false);
    assert.equal(await q.renew(a), false);
    assert.equal(await q.fail(a, new Error("late"), false), "lost");
    assert.ok(await q.complete(b));
  }));

Deno.test("lease: a job whose workers keep dying is dead-lettered after max_attempts", () =>
  withQueues(async ({ jobs, clock }) => {
    const q = jobs.queue("cache");
    await q.enqueue(spec("k"));
    for (let i = 0; i < CFG.maxAttempts; i++) {
      assert.equal((await q.claim("w", 1)).length, 1);
      clock.now += CFG.leaseSecs * 1000 + 1;
    }
    assert.deepEqual(await q.claim("w", 1), []);
    const failed = await q.listFailed(null, 10);
    assert.equal(failed.items.length, 1);
    assert.match(failed.items[0].last_error!, /lease expired 3 times/);
  }));

Deno.test("lease: an index or scan job whose worker dies twice holding it is poison", () =>
  withQueues(async ({ jobs, clock }) => {
    for (const name of ["index", "scan"] as const) {
      const q = jobs.queue(name);
      await q.enqueue(spec(`${name}-k`));
      // The first death may be a restart: the job runs again and remembers it.
      const [first] = await q.claim("w", 1);
      assert.equal(first.record.takeovers, undefined);
      clock.now += CFG.leaseSecs * 1000 + 1;
      const [again] = await q.claim("w2", 1);
      assert.equal(again.record.takeovers, 1);
      clock.now += CFG.leaseSecs * 1000 + 1;
      assert.deepEqual(await q.claim("w3", 1), []);
      const failed = await q.listFailed(null, 10);
      assert.equal(failed.items.length, 1);
      assert.match(failed.items[0].last_error!, /poison: its worker died 2 times/);
      assert.equal(failed.items[0].attempts, 2);
    }
    // A network job's worker dying is no verdict on the job: it keeps its attempts.
    const c = jobs.queue("cache");
    await c.enqueue(spec("c"));
    for (let i = 0; i < 2; i++) {
      assert.equal((await c.claim("w", 1)).length, 1);
      clock.now += CFG.leaseSecs * 1000 + 1;
    }
    assert.equal((await c.claim("w", 1)).length, 1);
  }));

Deno.test("fail: exponential backoff with jitter in [d/2, d], capped, then dead letter", () =>
  withQueues(
    async ({ jobs, clock }) => {
      const q = jobs.queue("replication");
      await q.enqueue(spec("k"));
      const delays: number[] = [];
      for (let attempt = 1; attempt <= 5; attempt++) {
        const [c] = await q.claim("w", 1);
        assert.equal(c.record.attempts, attempt);
        const outcome = await q.fail(c, new Error(`boom ${attempt}`), false);
        if (attempt === 5) {
          assert.equal(outcome, "failed");
          break;
        }
        assert.equal(outcome, "retry");
        const [p] = (await q.listPending(null, 10)).items;
        assert.equal(p.last_error, undefined, "pending view carries no last_error");
        const delay = Date.parse(p.not_before!) - clock.now;
        delays.push(delay);
        const d = Math.min(8000, 1000 * 2 ** (attempt - 1));
        assert.ok(
          delay >= d / 2 && delay <= d,
          `attempt ${attempt}: ${delay} not in [${d / 2}, ${d}]`,
        );
        assert.deepEqual(await q.claim("w", 1), [], "not due before its backoff");
        clock.now += delay;
      }
      const [f] = (await q.listFailed(null, 10)).items;
      assert.equal(f.last_error, "boom 5");
      assert.equal(f.attempts, 5);
      assert.equal(f.failed_at, new Date(clock.now).toISOString());
      assert.equal(f.not_before, undefined);
      assert.equal(delays.length, 4);
    },
    { ...CFG, maxAttempts: 5 },
  ));

Deno.test("fail: a permanent error dead-letters at once", () =>
  withQueues(async ({ jobs }) => {
    const q = jobs.queue("cache");
    await q.enqueue(spec("k"));
    const [c] = await q.claim("w", 1);
    assert.equal(await q.fail(c, new Error("digest mismatch"), true), "failed");
    assert.equal((await q.listPending(null, 10)).items.length, 0);
    assert.equal((await q.listFailed(null, 10)).items[0].last_error, "digest mismatch");
  }));

Deno.test("fail: a retry superseded by a newer pending job of its lock key folds into it", () =>
  withQueues(async ({ jobs }) => {
    const q = jobs.queue("cache");
    await q.enqueue(spec("k"));
    const [c] = await q.claim("w", 1);
    await q.enqueue(spec("k")); // a write during the run
    assert.equal(await q.fail(c, new Error("x"), false), "retry");
    const pending = (await q.listPending(null, 10)).items;
    assert.equal(pending.length, 1);
    assert.notEqual(pending[0].id, c.record.id);
  }));

Deno.test("retry and delete: failed → pending with attempts 0; deletes free the lock key", () =>
  withQueues(async ({ jobs }) => {
    const q = jobs.queue("scan");
    await q.enqueue(spec("k"));
    const [c] = await q.claim("w", 1);
    await q.fail(c, new Error("no"), true);
    const [f] = (await q.listFailed(null, 10)).items;
    assert.equal(
      await q.retryFailed("0000000000000000-00000000-0000-0000-0000-000000000000"),
      false,
    );
    assert.ok(await q.retryFailed(f.storage_key));
    assert.equal(await q.retryFailed(f.storage_key), false);
    const [p] = (await q.listPending(null, 10)).items;
    assert.equal(p.attempts, 0);
    assert.equal(p.id, c.record.id);
    // The retried job holds the lock key again.
    assert.equal((await q.enqueue(spec("k"))).enqueued, false);
    assert.ok(await q.deletePending(p.storage_key));
    assert.equal(await q.deletePending(p.storage_key), false);
    assert.equal((await q.enqueue(spec("k"))).enqueued, true, "lock freed by the delete");
    const [c2] = await q.claim("w", 1);
    await q.fail(c2, new Error("again"), true);
    const [f2] = (await q.listFailed(null, 10)).items;
    assert.ok(await q.deleteFailed(f2.storage_key));
    assert.equal(await q.deleteFailed(f2.storage_key), false);
    assert.equal((await q.listFailed(null, 10)).items.length, 0);
  }));

Deno.test("delete pending: an in-flight job's worker loses it", () =>
  withQueues(async ({ jobs }) => {
    const q = jobs.queue("cache");
    await q.enqueue(spec("k"));
    const [c] = await q.claim("w", 1);
    assert.ok(await q.deletePending(c.key));
    assert.equal(await q.renew(c), false);
    assert.equal(await q.complete(c), false);
  }));

Deno.test("poison: a pending value that is not a job moves to the failed set, never runs", () =>
  withQueues(async ({ t, jobs, events }) => {
    const q = jobs.queue("cache");
    await t.kv.set(pendingKey("cache", "0000-garbage"), "not a job");
    await t.kv.set(pendingKey("cache", "0000000000000001-00000000-0000-0000-0000-000000000001"), {
      kind: "fill-blob",
      attempts: "many",
    });
    await q.enqueue(spec("good"));
    const claims = await q.claim("w", 10);
    assert.deepEqual(claims.map((c) => c.record.lock_key), ["good"]);
    assert.equal(events.poisoned, 2);
    const failed = (await q.listFailed(null, 10)).items;
    assert.equal(failed.length, 2);
    for (const f of failed) assert.match(f.last_error!, /malformed job record/);
    await assert.rejects(() => q.retryFailed(failed[0].storage_key), NotAJobError);
    assert.ok(await q.deleteFailed(failed[0].storage_key));
    // A poison value in the failed set still lists.
    await t.kv.set(["job", "cache", "f", "0000000000000002-x"], 42);
    const again = (await q.listFailed(null, 10)).items;
    assert.equal(again.length, 2);
    assert.equal(again[0].kind, "unknown");
  }));

Deno.test("enqueueInto: joins the caller's commit; the newest job of a lock key supersedes", () =>
  withQueues(async ({ t, jobs }) => {
    const q = jobs.queue("replication");
    for (let i = 0; i < 3; i++) {
      const op = t.kv.atomic().set(["write", i], i);
      q.enqueueInto(op, spec("tag:latest", { i }));
      assert.ok((await op.commit()).ok);
    }
    assert.equal((await q.listPending(null, 10)).items.length, 3);
    const claims = await q.claim("w", 10);
    assert.equal(claims.length, 1);
    assert.deepEqual(claims[0].record.payload, { i: 2 });
    assert.equal((await q.listPending(null, 10)).items.length, 1, "superseded records removed");
  }));

Deno.test("listing pages by storage key with next = the last key, in due order", () =>
  withQueues(async ({ jobs, clock }) => {
    const q = jobs.queue("cache");
    for (let i = 0; i < 250; i++) {
      clock.now += 1;
      await q.enqueue(spec(`k${i}`));
    }
    const seen: string[] = [];
    let after: string | null = null;
    for (;;) {
      const page = await q.listPending(after, 100);
      seen.push(...page.items.map((j) => j.lock_key));
      if (!page.next) break;
      assert.equal(page.next, page.items[page.items.length - 1].storage_key);
      after = page.next;
    }
    assert.deepEqual(seen, Array.from({ length: 250 }, (_, i) => `k${i}`));
    assert.deepEqual((await q.listPending(null, 0)).items, []);
    const c = await q.counts();
    assert.equal(c.pending, 250);
    assert.equal(c.failed, 0);
  }));

Deno.test("enqueue refuses a record over the KV value limit instead of failing the commit", () =>
  withQueues(async ({ jobs }) => {
    const q = jobs.queue("cache");
    await assert.rejects(() => q.enqueue(spec("big", "x".repeat(70_000))), /larger than/);
    await assert.rejects(() => q.enqueue(spec("k".repeat(2000))), /lock key longer/);
  }));
