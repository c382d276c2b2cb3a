// Job queue throughput (issue: durable jobs, Performance): 10,000 no-op jobs enqueued (one
// writer, then 16 concurrent writers) and drained by this process's runner, on a local KV file.
// Run: deno run -A --unstable-kv bench/jobs_bench.ts [--small]
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { JobQueues } from "../lib/jobs/mod.ts";
import { defaultJobQueue } from "../lib/config/mod.ts";
import { withBusyRetry } from "../lib/kv/mod.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const N = Deno.args.includes("--small") ? 1_000 : 10_000;

async function round(concurrentEnqueuers: number, drainConcurrency: number) {
  const dir = await Deno.makeTempDir({ prefix: "wharf-jobs-bench-" });
  const kv = withBusyRetry(await Deno.openKv(join(dir, "jobs.kv")));
  const cfg = {
    ...defaultJobQueue(),
    pollIntervalMs: 50,
    concurrency: { cache: drainConcurrency, replication: 0, scan: 0, index: 0, events: 0 },
  };
  const jobs = new JobQueues(kv, cfg);
  let done = 0;
  let allDone!: () => void;
  const finished = new Promise<void>((r) => (allDone = r));
  jobs.handle("cache", "noop", () => {
    if (++done === N) allDone();
    return Promise.resolve();
  });
  const q = jobs.queue("cache");
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrentEnqueuers }, async () => {
      for (let i = next++; i < N; i = next++) {
        await q.enqueue({ kind: "noop", payload: { i }, lockKey: `noop-${i}` });
      }
    }),
  );
  const enqueueS = (performance.now() - t0) / 1000;
  // A duplicate lock key is a counted no-op, never a second job.
  const dup = await q.enqueue({ kind: "noop", payload: {}, lockKey: "noop-0" });
  if (dup.enqueued) throw new Error("duplicate lock key enqueued");
  const t1 = performance.now();
  jobs.start("bench");
  await finished;
  const drainS = (performance.now() - t1) / 1000;
  await jobs.stop(1000);
  kv.close();
  await Deno.remove(dir, { recursive: true });
  return {
    jobs: N,
    enqueuers: concurrentEnqueuers,
    drain_concurrency: drainConcurrency,
    enqueue_per_s: N / enqueueS,
    drain_per_s: N / drainS,
  };
}

const rows = [await round(1, 4), await round(16, 4), await round(16, 16)];
for (const r of rows) console.log(JSON.stringify(r));
await Deno.mkdir(join(ROOT, "bench", "out"), { recursive: true });
await Deno.writeTextFile(join(ROOT, "bench", "out", "jobs.json"), JSON.stringify(rows, null, 2));
console.log(`
| ${N} no-op jobs, local KV file | enqueue jobs/s | drain jobs/s |
|---|---|---|
${
  rows.map((r) =>
    `| ${r.enqueuers} enqueuer(s), runner concurrency ${r.drain_concurrency} | ${
      r.enqueue_per_s.toFixed(0)
    } | ${r.drain_per_s.toFixed(0)} |`
  ).join("\n")
}
`);
