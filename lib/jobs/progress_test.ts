// Run records and batch counting on a real KV file: a batch's jobs are counted when they settle
// (completed, dead-lettered, superseded, deleted; a retry takes its failure back), its record is
// written at most every WRITE_EVERY_MS, a silent run reads as stalled, and only the newest
// KEEP_PER_KIND runs of a kind stay.
import * as assert from "node:assert/strict";
import { openTestKv } from "../../tests/helpers/kv.ts";
import { defaultJobQueue, type JobQueueConfig } from "../config/mod.ts";
import { JobQueues, KEEP_PER_KIND, Runs, STALL_MS, WRITE_EVERY_MS } from "./mod.ts";
import { K } from "../kv/mod.ts";

const CFG: JobQueueConfig = { ...defaultJobQueue(), maxAttempts: 2, leaseSecs: 30 };

async function withKv(fn: (kv: Deno.Kv, clock: { now: number }) => Promise<void>) {
  const t = await openTestKv();
  const clock = { now: Date.UTC(2026, 0, 1) };
  try {
    await fn(t.kv, clock);
    assert.deepEqual(t.violations, []);
  } finally {
    await t.close();
  }
}

Deno.test("a batch: jobs counted as they settle, state queuing → running → done", () =>
  withKv(async (kv, clock) => {
    const now = () => clock.now;
    const jobs = new JobQueues(kv, CFG, {}, now);
    const runs = new Runs(kv, now);
    const q = jobs.queue("index");
    const run = await runs.start("reindex", "every namespace", "reindex command");
    for (let i = 0; i < 5; i++) {
      await q.enqueue({ kind: "t", payload: i, lockKey: `l${i}`, batch: run.batch });
      run.update({ queued: i + 1 });
    }
    let [v] = await runs.list("index");
    assert.equal(v.state, "queuing");
    assert.equal(v.total, null);
    assert.equal(v.queue, "index");
    // Not written yet: updates within WRITE_EVERY_MS stay in memory.
    assert.equal(v.queued, 0);
    await run.finish({ total: 5, queued: 5 });
    [v] = await runs.list("index");
    assert.deepEqual([v.state, v.done, v.failed, v.total, v.queued], ["running", 0, 0, 5, 5]);

    const claims = await q.claim("w", 5);
    assert.equal(claims.length, 5);
    assert.equal(await q.complete(claims[0]), true);
    assert.equal(await q.complete(claims[1]), true);
    assert.equal(await q.fail(claims[2], new Error("bad"), true), "failed");
    [v] = await runs.list("index");
    assert.deepEqual([v.state, v.done, v.failed], ["running", 2, 1]);
    // A retry takes the failure back; the job then completes.
    const failed = (await q.listFailed(null, 10)).items[0];
    assert.equal(await q.retryFailed(failed.storage_key), true);
    [v] = await runs.list("index");
    assert.deepEqual([v.done, v.failed], [2, 0]);
    // An admin's delete settles a job too.
    assert.equal(await q.deletePending(claims[3].key), true);
    assert.equal(await q.complete(claims[4]), true);
    [v] = await runs.list("index");
    assert.deepEqual([v.state, v.done, v.failed], ["running", 4, 0]);
    const [again] = await q.claim("w", 1);
    assert.equal(await q.complete(again), true);
    [v] = await runs.list("index");
    assert.deepEqual([v.state, v.done, v.failed, v.total], ["done", 5, 0, 5]);
    // Other queues' pages show none of it.
    assert.deepEqual(await runs.list("scan"), []);
  }));

Deno.test("a superseded batch job counts as done (the newer job does its work)", () =>
  withKv(async (kv, clock) => {
    const now = () => clock.now;
    const jobs = new JobQueues(kv, CFG, {}, now);
    const runs = new Runs(kv, now);
    const q = jobs.queue("scan");
    const run = await runs.start("rescan", "every namespace", "scan command");
    await q.enqueue({ kind: "t", payload: 1, lockKey: "same", batch: run.batch });
    await run.finish({ total: 1, queued: 1 });
    const op = kv.atomic();
    q.enqueueInto(op, { kind: "t", payload: 2, lockKey: "same" });
    await op.commit();
    clock.now += 1;
    const claimed = await q.claim("w", 5);
    assert.equal(claimed.length, 1);
    const [v] = await runs.list("scan");
    assert.deepEqual([v.state, v.done], ["done", 1]);
  }));

Deno.test("records: written at most every WRITE_EVERY_MS; a silent run is stalled", () =>
  withKv(async (kv, clock) => {
    const runs = new Runs(kv, () => clock.now);
    const run = await runs.start("sync", "team#0 (library/alpine)", "schedule");
    run.update({ done: 1, total: 10 });
    run.update({ done: 2 });
    let v = (await runs.get("sync", run.id.slice(17), clock.now))!;
    assert.deepEqual([v.state, v.done, v.total], ["running", 0, null]);
    clock.now += WRITE_EVERY_MS;
    run.update({ done: 3, bytes: 1000 });
    await run.stop();
    v = (await runs.get("sync", run.id.slice(17), Date.UTC(2026, 0, 1)))!;
    assert.deepEqual([v.state, v.done, v.total, v.bytes], ["running", 3, 10, 1000]);
    clock.now += STALL_MS + 1;
    [v] = await runs.list("cache");
    assert.equal(v.state, "stalled");
    // Resumed by the run's id and start: the same record goes on.
    const resumed = await runs.start("sync", "team#0", "schedule", {
      id: run.id.slice(17),
      startedAt: Date.UTC(2026, 0, 1),
    });
    assert.equal(resumed.id, run.id);
    await resumed.finish({ done: 10, outcome: "ok" });
    [v] = await runs.list("cache");
    assert.deepEqual([v.state, v.done, v.outcome], ["done", 10, "ok"]);
    assert.equal((await runs.list("cache")).length, 1);
  }));

Deno.test("only the newest KEEP_PER_KIND runs of a kind are kept, counters included", () =>
  withKv(async (kv, clock) => {
    const runs = new Runs(kv, () => clock.now);
    const jobs = new JobQueues(kv, CFG, {}, () => clock.now);
    const first = await runs.start("reindex", "first", "test");
    await jobs.queue("index").enqueue({ kind: "t", payload: 0, lockKey: "x", batch: first.batch });
    const [c] = await jobs.queue("index").claim("w", 1);
    await jobs.queue("index").complete(c);
    await first.finish({ total: 1 });
    for (let i = 0; i < KEEP_PER_KIND + 3; i++) {
      clock.now += 1000;
      await (await runs.start("reindex", `run ${i}`, "test")).finish({ total: 0 });
    }
    const views = await runs.list("index");
    assert.equal(views.length, KEEP_PER_KIND);
    assert.equal(views[0].label, `run ${KEEP_PER_KIND + 2}`);
    let left = 0;
    for await (const _ of kv.list({ prefix: K.progressOf("reindex") })) left++;
    assert.equal(left, KEEP_PER_KIND);
  }));
