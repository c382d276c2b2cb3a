// Everything Wharf keeps in Deno KV: every key (keys.ts), the records behind manifests, tags,
// blobs, uploads, pulls, usage and the pull-through cache, and the KV plumbing every writer
// shares (the one commit-retry loop, commit limits, the key guard, the busy retry).
export * from "./keys.ts";
export { BlobMeta, type LinkRead } from "./blobs.ts";
export { ManifestMeta, type ManifestWrite } from "./manifests.ts";
export { type Settle, type SettleOutcome, SignatureMeta } from "./signature_meta.ts";
export { UploadMeta } from "./uploads.ts";
export { NO_FACTS, type WriteFact, type WriteFacts } from "./write_facts.ts";
export { openMetadata } from "./open.ts";
export { reclaimingError, ReclaimMeta, STALE_MARKER_MS } from "./reclaim.ts";
export { LEASE_MS, ScrubMeta } from "./scrub_meta.ts";
export { countQuarantines, QuarantineMeta, type UnlinkOutcome } from "./quarantine.ts";
export { VERIFY_LEASE_MS, VerifyMeta } from "./verify_meta.ts";
export { instrumentKv, type ObserveOp as ObserveKvOp } from "./instrumented_kv.ts";
export { countUploadSessions, UPLOAD_CENSUS_CAP } from "./upload_census.ts";
export {
  CLIENT_MAX,
  type CompactResult,
  PullMeta,
  type PullRecord,
  type Retention,
  sweepPullHistory,
} from "./pulls.ts";
export { SvcMeta } from "./svc_reads.ts";
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
  commitRetryCounts,
  commitWithRetry,
  conflictPause,
  DEFAULT_COMMIT_ATTEMPTS,
  type RetryOptions,
} from "./commit_retry.ts";
export { UpstreamChecks } from "./upstream_checks.ts";
export {
  formatBytes,
  quotaExceeded,
  type QuotaPolicy,
  type Recount,
  UsageLedger,
  UsageMeta,
  usageValue,
} from "./usage.ts";
export { type CachedRevision, CacheMeta, stampOf } from "./cache_meta.ts";
