// Durable job queues over KV (DESIGN.md Jobs): `cache`, `replication`, `scan`, `index`.
// JobQueues is what the rest of Wharf holds: one JobQueue per queue name, the handlers by
// kind, and the runner that drains them in this process (`serve`) or alone (`worker`).
import { JOB_QUEUES, type JobQueueConfig, type QueueName } from "../config/mod.ts";
import { type JobEvents, JobQueue } from "./queue.ts";
import { type JobHandler, JobRunner, type RunnerEvents } from "./runner.ts";

export {
  type Claim,
  ENQUEUE_MUTATIONS,
  type EnqueueResult,
  type FailOutcome,
  type JobEvents,
  JobQueue,
  type JobSpec,
  MAX_LOCK_KEY_CHARS,
  type Page,
} from "./queue.ts";
export { type JobContext, type JobHandler, type JobOutcome, JobRunner } from "./runner.ts";
export { isPermanent, JobTooLargeError, NotAJobError, PermanentJobError } from "./errors.ts";
export { periodic, type PeriodicOptions } from "./periodic.ts";
export { failedKey, isStorageKey, type JobRecord, type JobView, storageKey } from "./record.ts";

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
