// lib/registry's public surface: the Registry (registry.ts) and what its callers name of its
// parts (reads, listings, uploads), and the Scrubber (scrub.ts) with its hooks. The pull-through
// cache it composes lives in lib/pull_through.
export {
  Registry,
  type RegistryOptions,
  type ServedManifest,
  type UsageFigures,
} from "./registry.ts";
export { type BlobRead } from "./blobs.ts";
export { type ReferrerDescriptor, REFERRERS_PAGE } from "./listings.ts";
export { type DeleteOptions, MAX_TAGS_PER_PUSH } from "./manifests.ts";
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
export { PULLS_DEFAULT_N, PULLS_MAX_N, type PullsPage } from "./pulls.ts";
export {
  type NamespacesListing,
  type RepositorySummary,
  type RevisionRow,
  type UiConfig,
} from "./svc_listings.ts";
