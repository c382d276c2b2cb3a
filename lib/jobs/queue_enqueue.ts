// Adding jobs to a queue (queue.ts): a job of its own commit (`enqueue`: one pending job per
// lock key), a job riding in the commit of the write that causes it (`enqueueInto`, `plan`), and
// a waiting job made due now (`expedite`). The context every part of a queue shares is here too.
import type { JobQueueConfig, QueueName } from "../config/mod.ts";
import { commitWithRetry, type PlannedMutation, valueSize } from "../kv/mod.ts";
import { JobTooLargeError } from "./errors.ts";
import {
  type JobBatch,
  type JobRecord,
  lockKey,
  parseRecord,
  pendingKey,
  storageKey,
} from "./record.ts";

export interface JobSpec {
  kind: string;
  payload: unknown;
  /** one pending job per lock key */
  lockKey: string;
  /** earliest run time, ms since the epoch (default now) */
  notBefore?: number;
  maxAttempts?: number;
  /** the run it counts toward (Runs.start's tracker.batch) */
  batch?: JobBatch;
}

export interface EnqueueResult {
  /** false: a pending job with the same lock key already existed (nothing written) */
  enqueued: boolean;
  storageKey: string;
}

export interface JobEvents {
  enqueued?(queue: QueueName, dedup: boolean): void;
  claimed?(queue: QueueName): void;
  /** a record that was not a job, moved to the failed set */
  poisoned?(queue: QueueName): void;
}

/** What the parts of one queue share (JobQueue's constructor arguments). */
export interface QueueContext {
  readonly kv: Deno.Kv;
  readonly name: QueueName;
  readonly cfg: JobQueueConfig;
  readonly events: JobEvents;
  /** called after a commit that made work due (in-process wake-up) */
  readonly wake: () => void;
  readonly now: () => number;
}

/** Mutations `enqueueInto` adds to a caller's commit. */
export const ENQUEUE_MUTATIONS = 2;
/** A record is one KV value: keep well under the 64 KiB limit. */
export const MAX_RECORD_BYTES = 60 * 1024;
/** A lock key is part of a KV key (2 KiB limit). */
export const MAX_LOCK_KEY_CHARS = 1024;

export class JobEnqueue {
  constructor(private readonly q: QueueContext) {}

  private record(spec: JobSpec): JobRecord {
    if (spec.lockKey.length > MAX_LOCK_KEY_CHARS) {
      throw new JobTooLargeError(`lock key longer than ${MAX_LOCK_KEY_CHARS} characters`);
    }
    const r: JobRecord = {
      id: crypto.randomUUID(),
      kind: spec.kind,
      payload: spec.payload,
      lock_key: spec.lockKey,
      attempts: 0,
      max_attempts: spec.maxAttempts ?? this.q.cfg.maxAttempts,
      created_at: this.q.now(),
      ...(spec.batch ? { batch: spec.batch } : {}),
    };
    if (valueSize(r) > MAX_RECORD_BYTES) {
      throw new JobTooLargeError(`job ${spec.kind} is larger than ${MAX_RECORD_BYTES} bytes`);
    }
    return r;
  }

  /** Adds a job unless one with its lock key is already pending (a counted no-op). */
  async enqueue(spec: JobSpec): Promise<EnqueueResult> {
    const { kv, name } = this.q;
    const lk = lockKey(name, spec.lockKey);
    const r = await commitWithRetry<EnqueueResult>("jobs.enqueue", async () => {
      const lock = await kv.get<{ key: string }>(lk);
      if (lock.value) {
        const held = await kv.get(pendingKey(name, lock.value.key));
        if (held.value !== null) return { done: { enqueued: false, storageKey: lock.value.key } };
      }
      const rec = this.record(spec);
      const sk = storageKey(spec.notBefore ?? this.q.now(), rec.id);
      const op = kv.atomic().check(lock)
        .set(pendingKey(name, sk), rec)
        .set(lk, { key: sk });
      return { op, value: { enqueued: true, storageKey: sk } };
    }, {
      exhausted: () => new Error(`enqueue on ${name}: lock key ${spec.lockKey} kept changing`),
    });
    this.q.events.enqueued?.(name, !r.enqueued);
    if (r.enqueued) this.q.wake();
    return r;
  }

  /**
   * Adds a job to a caller's commit (the write that causes it), blind: no read, no check,
   * `ENQUEUE_MUTATIONS` mutations. An older pending job of the same lock key is superseded:
   * the pointer moves to the new one and a claim drops the old one.
   */
  enqueueInto(op: Deno.AtomicOperation, spec: JobSpec): string {
    const rec = this.record(spec);
    const sk = storageKey(spec.notBefore ?? this.q.now(), rec.id);
    op.set(pendingKey(this.q.name, sk), rec).set(lockKey(this.q.name, spec.lockKey), { key: sk });
    return sk;
  }

  /**
   * `enqueueInto` as planned mutations, for commits built with a CommitBudget (the metadata
   * layer adds them next to the write that causes the job).
   */
  plan(spec: JobSpec): PlannedMutation[] {
    const rec = this.record(spec);
    const sk = storageKey(spec.notBefore ?? this.q.now(), rec.id);
    return [
      { kind: "set", key: pendingKey(this.q.name, sk), value: rec },
      { kind: "set", key: lockKey(this.q.name, spec.lockKey), value: { key: sk } },
    ];
  }

  /** Call after committing `enqueueInto`: counts it and wakes local workers. */
  committed(count = 1): void {
    for (let i = 0; i < count; i++) this.q.events.enqueued?.(this.q.name, false);
    this.q.wake();
  }

  /**
   * Makes a waiting (unclaimed) job due now, e.g. when the work it insures against just
   * failed in the foreground. False when it is gone or already running.
   */
  async expedite(sk: string): Promise<boolean> {
    const { kv, name } = this.q;
    const pk = pendingKey(name, sk);
    const r = await commitWithRetry<"moved" | "due" | "gone">("jobs.expedite", async () => {
      const p = await kv.get<unknown>(pk);
      const rec = parseRecord(p.value);
      if (!rec || rec.holder !== undefined) return { done: "gone" };
      const nk = storageKey(this.q.now(), rec.id);
      if (nk >= sk) return { done: "due" };
      const lk = lockKey(name, rec.lock_key);
      const lock = await kv.get<{ key: string }>(lk);
      const op = kv.atomic().check(p).check(lock).delete(pk)
        .set(pendingKey(name, nk), rec);
      if (lock.value?.key === sk) op.set(lk, { key: nk });
      return { op, value: "moved" };
    }, { otherwise: () => "gone" });
    if (r === "moved") this.q.wake();
    return r !== "gone";
  }
}
