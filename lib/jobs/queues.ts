// The queues one process holds: one JobQueue per queue name sharing one KV, the handlers by job
// kind, and the runners started to drain them in this process.
import { JOB_QUEUES, type JobQueueConfig, type QueueName } from "../config/mod.ts";
import { type JobEvents, JobQueue } from "./queue.ts";
import { type JobHandler, JobRunner, type RunnerEvents } from "./runner.ts";

export function isQueueName(s: string): s is QueueName {
  return (JOB_QUEUES as readonly string[]).includes(s);
}

export class JobQueues {
  private readonly byName = new Map<QueueName, JobQueue>();
  private readonly handlers = new Map<string, JobHandler>();
  private readonly runners = new Set<JobRunner>();

  constructor(
    kv: Deno.Kv,
    readonly cfg: JobQueueConfig,
    private readonly events: JobEvents & RunnerEvents = {},
    now: () => number = Date.now,
  ) {
    for (const q of JOB_QUEUES) {
      this.byName.set(q, new JobQueue(kv, q, cfg, events, () => this.wake(q), now));
    }
  }

  queue(name: QueueName): JobQueue {
    return this.byName.get(name)!;
  }

  get all(): JobQueue[] {
    return [...this.byName.values()];
  }

  /** Registers the handler of `kind` jobs on `queue` (before `start`). */
  handle(queue: QueueName, kind: string, handler: JobHandler): void {
    this.handlers.set(`${queue}:${kind}`, handler);
  }

  /** Starts draining `queues` (default all) in this process; `holder` names it in leases. */
  start(holder: string, queues: QueueName[] = [...JOB_QUEUES]): JobRunner {
    const r = new JobRunner(
      queues.map((q) => this.queue(q)),
      this.handlers,
      this.cfg,
      holder,
      this.events,
    );
    this.runners.add(r);
    r.start();
    return r;
  }

  async stop(graceMs?: number): Promise<void> {
    await Promise.all([...this.runners].map((r) => r.stop(graceMs)));
    this.runners.clear();
  }

  private wake(q: QueueName): void {
    for (const r of this.runners) r.wake(q);
  }
}
