// The registry's own records in Deno KV: manifests, tags, blobs, uploads, pulls, usage,
// quarantine, verify and scrub state, signature verdicts and the pull-through cache's records,
// each written in one atomic commit on the KV platform (lib/kv: keys, limits, the commit-retry
// loop), and the facts those writes state for their effects (write_facts.ts).
export { BlobMeta, type LinkRead } from "./blobs.ts";
export { type Alongside, ManifestMeta, type ManifestWrite } from "./manifests.ts";
export { type Settle, type SettleOutcome, SignatureMeta } from "./signature_meta.ts";
export { UploadMeta } from "./uploads.ts";
export { NO_FACTS, type WriteFact, type WriteFacts } from "./write_facts.ts";
export { reclaimingError, ReclaimMeta, STALE_MARKER_MS } from "./reclaim.ts";
export { LEASE_MS, ScrubMeta } from "./scrub_meta.ts";
export { countQuarantines, QuarantineMeta, type UnlinkOutcome } from "./quarantine.ts";
export { VERIFY_LEASE_MS, VerifyMeta } from "./verify_meta.ts";
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
export { DigestHolds } from "./digest_holds.ts";
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
