// A worker process for the queue contract suite: drains the queues of a KV file with probe
// handlers that record every run in the same KV, so the test can count runs per job.
// Usage: job_worker.ts <kv file> <holder> <job_queue config JSON>
import { JobQueues, PermanentJobError } from "../../lib/jobs/mod.ts";
import type { JobQueueConfig } from "../../lib/config/mod.ts";
import { withBusyRetry } from "../../lib/kv/mod.ts";

const [path, holder, cfgJson] = Deno.args;
const kv = withBusyRetry(await Deno.openKv(path));
const cfg = JSON.parse(cfgJson) as JobQueueConfig;
const jobs = new JobQueues(kv, cfg);

interface Probe {
  id: string;
  sleepMs?: number;
}

for (const q of ["cache", "replication", "scan", "index"] as const) {
  jobs.handle(q, "probe", async (job) => {
    const p = job.payload as Probe;
    await kv.atomic().sum(["probe", "runs", p.id], 1n).set(["probe", "by", p.id], holder).commit();
    if (p.sleepMs) await new Promise((r) => setTimeout(r, p.sleepMs));
  });
  // Hangs on its first run anywhere (the test kills that worker), completes on the next.
  jobs.handle(q, "hang-once", async (job) => {
    const p = job.payload as Probe;
    const started = await kv.get(["probe", "started", p.id]);
    if (started.value === null) {
      await kv.set(["probe", "started", p.id], holder);
      await new Promise(() => {});
    }
    await kv.atomic().sum(["probe", "runs", p.id], 1n).set(["probe", "by", p.id], holder).commit();
  });
  jobs.handle(q, "flaky", async (job) => {
    const p = job.payload as Probe & { failures: number };
    await kv.atomic().sum(["probe", "runs", p.id], 1n).commit();
    if (job.attempt <= p.failures) throw new Error(`flaky attempt ${job.attempt}`);
  });
  jobs.handle(q, "forbidden", () => {
    throw new PermanentJobError("upstream answered 403");
  });
}

jobs.start(holder);
console.log("worker ready");
Deno.addSignalListener("SIGTERM", async () => {
  await jobs.stop(2000);
  kv.close();
  Deno.exit(0);
});
