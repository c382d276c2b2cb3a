// lib/registry's public surface: the Registry (registry.ts) and what its callers name of its
// parts (reads, pull-through, listings, uploads), and the Scrubber (scrub.ts) with its hooks.
export { Registry, type RegistryOptions, type UsageFigures } from "./registry.ts";
export { type BlobRead } from "./blobs.ts";
export {
  CACHE_FILL_KIND,
  type PulledManifest,
  type PullThroughResult,
  STALE_WARNING,
} from "./pull_through.ts";
export { type ReferrerDescriptor, REFERRERS_PAGE } from "./listings.ts";
export { type DeleteOptions, MAX_TAGS_PER_PUSH, parseSourceTimestamp } from "./manifests.ts";
export { rangeHeaders, type StartResult } from "./uploads.ts";
export {
  formatSummary,
  type ManifestRecordSweep,
  type PullSweep,
  type ReclaimHook,
  Scrubber,
  type ScrubOptions,
  type ScrubSummary,
} from "./scrub.ts";
export { sweepPullHistory } from "../metadata/mod.ts";
export {
  Quarantine,
  quarantineDetail,
  type QuarantineOutcome,
  type Throttle,
} from "./quarantine.ts";
export { formatVerify, Verifier, type VerifyOptions, type VerifySummary } from "./verify.ts";
export { CacheCap } from "./cache_cap.ts";
export { PULLS_DEFAULT_N, PULLS_MAX_N, type PullsPage } from "./pulls.ts";
export {
  type NamespacesListing,
  type RepositorySummary,
  type RevisionRow,
  type UiConfig,
} from "./svc_listings.ts";
