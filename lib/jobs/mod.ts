// Durable job queues over KV (DESIGN.md Jobs): `cache`, `replication`, `scan`, `index`.
// JobQueues (queues.ts) is what the rest of Wharf holds: one JobQueue per queue name, the
// handlers by kind, and the runner that drains them in this process (`serve`) or alone (`worker`).
export {
  type Claim,
  ENQUEUE_MUTATIONS,
  type EnqueueResult,
  type FailOutcome,
  type HealOutcome,
  type JobEvents,
  JobQueue,
  type JobSpec,
  MAX_LOCK_KEY_CHARS,
  type Page,
} from "./queue.ts";
export { type JobContext, type JobHandler, type JobOutcome, JobRunner } from "./runner.ts";
export { isPermanent, JobTooLargeError, NotAJobError, PermanentJobError } from "./errors.ts";
export { periodic, type PeriodicOptions } from "./periodic.ts";
export {
  failedKey,
  isStorageKey,
  type JobBatch,
  type JobRecord,
  type JobView,
  keyTime,
  storageKey,
} from "./record.ts";
export { isQueueName, JobQueues } from "./queues.ts";
export { BatchRun } from "./batch_run.ts";
export {
  countBatchJob,
  isRunKind,
  KEEP_PER_KIND,
  type ProgressSink,
  type ProgressUpdate,
  RUN_QUEUE,
  type RunKind,
  type RunRecord,
  Runs,
  RunTracker,
  type RunView,
  STALL_MS,
  WRITE_EVERY_MS,
} from "./progress.ts";
