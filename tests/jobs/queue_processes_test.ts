// The queue contract across processes: two workers on one KV file never run a job twice, a
// worker killed with SIGKILL mid-job loses it to another once the lease runs out, transient
// errors retry and permanent ones dead-letter at once, unknown kinds dead-letter.
import * as assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { defaultJobQueue, type JobQueueConfig } from "../../lib/config/mod.ts";
import { JobQueues } from "../../lib/jobs/mod.ts";
import { openTestKv, type TestKv } from "../helpers/kv.ts";

const WORKER = fileURLToPath(new URL("../helpers/job_worker.ts", import.meta.url));

const CFG: JobQueueConfig = {
  ...defaultJobQueue(),
  maxAttempts: 4,
  backoffMinMs: 50,
  backoffMaxMs: 200,
  leaseSecs: 2,
  pollIntervalMs: 50,
  concurrency: { cache: 4, replication: 2, scan: 1, index: 1, events: 0 },
};

interface Worker {
  child: Deno.ChildProcess;
  output: Promise<string>;
}

async function startWorker(path: string, holder: string, cfg = CFG): Promise<Worker> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "--unstable-kv", "-A", WORKER, path, holder, JSON.stringify(cfg)],
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const [a, b] = child.stdout.tee();
  const reader = a.pipeThrough(new TextDecoderStream()).getReader();
  let seen = "";
  while (!seen.includes("worker ready")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`worker ${holder} exited: ${seen}`);
    seen += value;
  }
  reader.releaseLock();
  a.cancel().catch(() => {});
  const output = Promise.all([
    new Response(b).text(),
    new Response(child.stderr).text(),
  ]).then(([o, e]) => o + e);
  return { child, output };
}

async function stopWorker(w: Worker, signal: Deno.Signal = "SIGTERM"): Promise<void> {
  try {
    w.child.kill(signal);
  } catch { /* already gone */ }
  await w.child.status;
  await w.output;
}

async function until(what: string, cond: () => Promise<boolean>, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function withKv(fn: (t: TestKv, jobs: JobQueues) => Promise<void>): Promise<void> {
  const t = await openTestKv();
  try {
    await fn(t, new JobQueues(t.kv, CFG));
    assert.deepEqual(t.violations, []);
  } finally {
    await t.close();
  }
}

const runs = async (kv: Deno.Kv, id: string) =>
  Number((await kv.get<Deno.KvU64>(["probe", "runs", id])).value?.value ?? 0n);

Deno.test("two worker processes on one KV file run each job exactly once", () =>
  withKv(async (t, jobs) => {
    const ids = Array.from({ length: 150 }, (_, i) => `job-${i}`);
    // Both workers are polling before the first job lands: started after the jobs, one of them
    // (slow to start on a loaded CI machine) could find the queue already drained.
    const workers = await Promise.all([startWorker(t.path, "w1"), startWorker(t.path, "w2")]);
    try {
      for (const id of ids) {
        await jobs.queue("cache").enqueue({
          kind: "probe",
          payload: { id, sleepMs: 5 },
          lockKey: id,
        });
      }
      await until(
        "the queue to drain",
        async () => (await jobs.queue("cache").counts()).pending === 0,
      );
    } finally {
      await Promise.all(workers.map((w) => stopWorker(w)));
    }
    const counts = await Promise.all(ids.map((id) => runs(t.kv, id)));
    assert.deepEqual(counts.filter((n) => n !== 1), [], "every job ran exactly once");
    const by = new Map<string, number>();
    for (const id of ids) {
      const h = (await t.kv.get<string>(["probe", "by", id])).value!;
      by.set(h, (by.get(h) ?? 0) + 1);
    }
    assert.deepEqual([...by.keys()].sort(), ["w1", "w2"], "both workers took work");
    assert.equal((await jobs.queue("cache").counts()).failed, 0);
  }));

Deno.test("a worker killed with SIGKILL mid-job: another takes the job over after the lease", () =>
  withKv(async (t, jobs) => {
    await jobs.queue("replication").enqueue({
      kind: "hang-once",
      payload: { id: "h" },
      lockKey: "h",
    });
    const a = await startWorker(t.path, "doomed");
    await until(
      "the job to start",
      async () => (await t.kv.get(["probe", "started", "h"])).value !== null,
    );
    await stopWorker(a, "SIGKILL");
    const killedAt = Date.now();
    const b = await startWorker(t.path, "survivor");
    try {
      await until("the takeover", async () => await runs(t.kv, "h") === 1);
    } finally {
      await stopWorker(b);
    }
    assert.ok(Date.now() - killedAt < 15_000);
    assert.equal((await t.kv.get(["probe", "by", "h"])).value, "survivor");
    assert.deepEqual((await jobs.queue("replication").counts()).pending, 0);
  }));

Deno.test("worker: transient errors retry with backoff, permanent and unknown kinds dead-letter", () =>
  withKv(async (t, jobs) => {
    const q = jobs.queue("scan");
    await q.enqueue({ kind: "flaky", payload: { id: "f", failures: 2 }, lockKey: "f" });
    await q.enqueue({ kind: "flaky", payload: { id: "g", failures: 9 }, lockKey: "g" });
    await q.enqueue({ kind: "forbidden", payload: {}, lockKey: "p" });
    await q.enqueue({ kind: "no-such-kind", payload: {}, lockKey: "u" });
    const w = await startWorker(t.path, "w");
    try {
      await until("all settled", async () => {
        const c = await q.counts();
        return c.pending === 0 && c.failed === 3;
      });
    } finally {
      await stopWorker(w);
    }
    assert.equal(await runs(t.kv, "f"), 3, "two failures then success");
    assert.equal(await runs(t.kv, "g"), CFG.maxAttempts, "retried up to max_attempts");
    const failed = (await q.listFailed(null, 10)).items;
    const byLock = Object.fromEntries(failed.map((f) => [f.lock_key, f]));
    assert.equal(byLock.g.last_error, "flaky attempt 4");
    assert.equal(byLock.g.attempts, CFG.maxAttempts);
    assert.equal(byLock.p.last_error, "upstream answered 403");
    assert.equal(byLock.p.attempts, 1, "permanent: no retry");
    assert.match(byLock.u.last_error!, /no handler for job kind no-such-kind/);
  }));
