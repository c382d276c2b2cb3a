// Drains queues: polls each queue's due jobs (one bounded `list` per idle poll), runs up to the
// queue's concurrency at once, renews leases while handlers run, and records the outcome.
// Local enqueues wake the loop at once; other processes' jobs are found by the next poll.
// `kv.enqueue` is not used: Deno Deploy has no KV queues and KV Connect refuses them.
import type { JobQueueConfig, QueueName } from "../config/mod.ts";
import { keepRenewed, renewEvery } from "../kv/mod.ts";
import { log } from "../log.ts";
import { isPermanent } from "./errors.ts";
import type { Claim, JobQueue } from "./queue.ts";

export interface JobContext {
  id: string;
  kind: string;
  payload: unknown;
  lockKey: string;
  /** this run's attempt number, from 1 */
  attempt: number;
  maxAttempts: number;
  /** aborted when the lease was lost or the runner stops */
  signal: AbortSignal;
}

export type JobHandler = (job: JobContext) => Promise<void>;

export type JobOutcome = "ok" | "retry" | "failed" | "lost";

export interface RunnerEvents {
  finished?(queue: QueueName, kind: string, outcome: JobOutcome, seconds: number): void;
}

interface Lane {
  queue: JobQueue;
  concurrency: number;
  running: Set<Promise<void>>;
  controllers: Set<AbortController>;
  wake: () => void;
  loop?: Promise<void>;
}

export class JobRunner {
  private readonly lanes: Lane[] = [];
  private stopped = false;

  constructor(
    queues: JobQueue[],
    private readonly handlers: Map<string, JobHandler>,
    private readonly cfg: JobQueueConfig,
    readonly holder: string,
    private readonly events: RunnerEvents = {},
  ) {
    for (const q of queues) {
      const concurrency = cfg.concurrency[q.name];
      if (concurrency > 0) {
        this.lanes.push({
          queue: q,
          concurrency,
          running: new Set(),
          controllers: new Set(),
          wake: () => {},
        });
      }
    }
  }

  /** Queues this runner drains. */
  get queues(): QueueName[] {
    return this.lanes.map((l) => l.queue.name);
  }

  start(): void {
    for (const lane of this.lanes) lane.loop = this.drain(lane);
  }

  /** Wakes the lane of `queue` (a local enqueue made work due). */
  wake(queue: QueueName): void {
    this.lanes.find((l) => l.queue.name === queue)?.wake();
  }

  /**
   * Stops claiming; running jobs get `graceMs` to finish, then their signals abort. A job cut
   * short keeps its record and is taken over when its lease runs out.
   */
  async stop(graceMs = 10_000): Promise<void> {
    this.stopped = true;
    for (const l of this.lanes) l.wake();
    const all = () => this.lanes.flatMap((l) => [...l.running]);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const grace = new Promise<void>((r) => timer = setTimeout(r, graceMs));
    await Promise.race([Promise.all(all()), grace]);
    clearTimeout(timer);
    for (const l of this.lanes) {
      for (const c of l.controllers) c.abort(new Error("worker stopping"));
    }
    await Promise.all(all());
    await Promise.all(this.lanes.map((l) => l.loop));
  }

  private async drain(lane: Lane): Promise<void> {
    while (!this.stopped) {
      const free = lane.concurrency - lane.running.size;
      let claimed = 0;
      if (free > 0) {
        try {
          const claims = await lane.queue.claim(this.holder, free);
          claimed = claims.length;
          for (const c of claims) this.launch(lane, c);
        } catch (e) {
          if (this.stopped) break;
          log.error("job poll failed", { queue: lane.queue.name, error: errorMessage(e) });
        }
      }
      // A full batch may mean more is due: poll again once a slot is free, without sleeping.
      if (claimed > 0 && claimed === free) {
        if (lane.running.size >= lane.concurrency) await this.slotOrWake(lane);
        continue;
      }
      await this.sleep(lane, this.cfg.pollIntervalMs);
    }
  }

  private slotOrWake(lane: Lane): Promise<void> {
    return new Promise((resolve) => {
      lane.wake = resolve;
      Promise.race(lane.running).then(resolve, resolve);
    });
  }

  private sleep(lane: Lane, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        resolve();
      }
      lane.wake = done;
    });
  }

  private launch(lane: Lane, c: Claim): void {
    const ac = new AbortController();
    lane.controllers.add(ac);
    const p = this.run(lane.queue, c, ac).finally(() => {
      lane.running.delete(p);
      lane.controllers.delete(ac);
      lane.wake();
    });
    lane.running.add(p);
  }

  private async run(queue: JobQueue, c: Claim, ac: AbortController): Promise<void> {
    const t0 = performance.now();
    const rec = c.record;
    // The claim is a lease on the record itself (its key holds the lease's end: queue.ts), renewed
    // by the one renewal loop; the final write follows the loop's stop, so the two never race on
    // the record's versionstamp.
    const renewal = keepRenewed(() => queue.renew(c), renewEvery(this.cfg.leaseSecs * 1000), {
      onError: (e) =>
        log.warn("job lease renewal failed", {
          queue: queue.name,
          id: rec.id,
          error: errorMessage(e),
        }),
    });
    renewal.signal.addEventListener("abort", () => ac.abort(renewal.signal.reason));
    let outcome: JobOutcome;
    try {
      const handler = this.handlers.get(`${queue.name}:${rec.kind}`);
      let error: unknown = null;
      let permanent = false;
      if (!handler) {
        error = new Error(`no handler for job kind ${rec.kind} on queue ${queue.name}`);
        permanent = true;
      } else {
        try {
          await handler({
            id: rec.id,
            kind: rec.kind,
            payload: rec.payload,
            lockKey: rec.lock_key,
            attempt: rec.attempts,
            maxAttempts: rec.max_attempts,
            signal: ac.signal,
          });
        } catch (e) {
          error = e;
          permanent = isPermanent(e);
        }
      }
      await renewal.stop();
      if (renewal.signal.aborted) outcome = "lost";
      else if (error === null) outcome = await queue.complete(c) ? "ok" : "lost";
      else {
        outcome = await queue.fail(c, error, permanent);
        const fields = { queue: queue.name, id: rec.id, kind: rec.kind, attempt: rec.attempts };
        if (outcome === "failed") {
          log.warn("job dead-lettered", { ...fields, error: errorMessage(error) });
        } else log.info("job failed, will retry", { ...fields, error: errorMessage(error) });
      }
    } catch (e) {
      // KV itself failed: the record stays and is taken over when the lease runs out.
      outcome = "lost";
      log.error("job bookkeeping failed", {
        queue: queue.name,
        id: rec.id,
        error: errorMessage(e),
      });
    } finally {
      await renewal.stop();
    }
    this.events.finished?.(queue.name, rec.kind, outcome, (performance.now() - t0) / 1000);
  }
}

function errorMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
