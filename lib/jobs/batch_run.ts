// A batch of jobs queued by one walk (a reindex, a rescan) and the run record the Jobs page
// shows of it (progress.ts): the record starts with the first job queued, counts only the jobs
// this batch queued (a job already pending for its lock key is another run's) and, when every
// job was pending already, is dropped (it has nothing to show).
import type { JobSpec } from "./queue_enqueue.ts";
import type { JobQueues } from "./queues.ts";
import { RUN_QUEUE, type RunKind, type Runs, type RunTracker } from "./progress.ts";

export class BatchRun {
  #run: RunTracker | null = null;
  #queued = 0;

  constructor(
    private readonly runs: Pick<Runs, "start">,
    private readonly jobs: Pick<JobQueues, "queue">,
    private readonly kind: RunKind,
    /** what the run's record says it does, and why it runs */
    private readonly label: string,
    private readonly cause: string,
  ) {}

  /** Queues `spec` on the kind's queue (RUN_QUEUE) as one of the batch. */
  async enqueue(spec: Omit<JobSpec, "batch">): Promise<void> {
    const run = this.#run ??= await this.runs.start(this.kind, this.label, this.cause);
    const r = await this.jobs.queue(RUN_QUEUE[this.kind]).enqueue({ ...spec, batch: run.batch });
    if (r.enqueued) run.update({ queued: ++this.#queued });
  }

  /** The walk queued everything: the record's last write, or its drop. */
  async finish(): Promise<void> {
    if (this.#queued === 0) await this.#run?.discard();
    else await this.#run?.finish({ total: this.#queued, queued: this.#queued });
  }

  /** The walk stopped (finished or not): the record's heartbeat stops. */
  async stop(): Promise<void> {
    await this.#run?.stop();
  }
}
