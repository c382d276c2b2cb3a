// The KV platform every folder that keeps records in Deno KV stands on: every key (keys.ts draws
// the whole layout and lists every first key part; key_guard.ts refuses any other under strict
// mode) and the types of the registry's records under them (keys_*.ts, by owner), opening the KV with the wrappers every process needs (open.ts: the busy retry,
// kv_busy.ts, and the strict limits), the commit limits (kv_limits.ts), the one commit-retry
// loop (commit_retry.ts), the KV's fault answers (kv_faults.ts), the timing wrapper
// (instrumented_kv.ts), the one lease and its renewal loop (lease.ts) and small read helpers
// (kv_util.ts). The records themselves belong to their owners (lib/metadata for the registry's,
// lib/jobs, lib/events, …).
export * from "./keys.ts";
export * from "./keys_blobs.ts";
export * from "./keys_manifests.ts";
export * from "./keys_signatures.ts";
export * from "./keys_quarantine.ts";
export { openMetadata } from "./open.ts";
export { instrumentKv, type ObserveOp as ObserveKvOp } from "./instrumented_kv.ts";
export {
  addJobs,
  addPlanned,
  CommitBudget,
  commitInBatches,
  enforceKvLimits,
  keySize,
  KV_LIMIT_MARKER,
  KV_LIMITS,
  KvLimitError,
  type PlannedMutation,
  strictIfRequested,
  valueSize,
} from "./kv_limits.ts";
export { BUSY_BOUND_MS, type KvWriteWatch, withBusyRetry } from "./kv_busy.ts";
export { kvFaultAnswer, type KvFaultKind } from "./kv_faults.ts";
export { enforceListedKeys, unlistedKey, UnlistedKeyError } from "./key_guard.ts";
export {
  type Attempt,
  COMMIT_RETRY_MS,
  CommitExhausted,
  commitRetryCounts,
  commitWithRetry,
  conflictPause,
  type RetryOptions,
} from "./commit_retry.ts";
export { getAll, hasAny, listAll } from "./kv_util.ts";
export {
  type HoldOptions,
  holdWhileRunning,
  keepRenewed,
  Lease,
  type LeaseFormat,
  type LeaseHolder,
  LeaseLost,
  Leases,
  type LeaseState,
  type Renewable,
  type Renewal,
  renewEvery,
  type RenewOptions,
  type Taken,
  UNTIL_FORMAT,
} from "./lease.ts";
