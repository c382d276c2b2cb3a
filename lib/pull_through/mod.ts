// The pull-through cache (SPEC §What the service does 5; DESIGN.md Pull-through): a repository
// with upstreams serves what it lacks from them (pull_through.ts, the object callers hold,
// handing to pull_manifests.ts: manifests, revalidation, stale-when-down; pull_blobs.ts: blobs,
// the `cache` fill job; pull_referrers.ts: referrers and signatures; pull_upstreams.ts: the
// upstream clients, rebuilt on a reload), fills each blob once for every client
// (blob_fill.ts), fills an image's small blobs ahead of the client (prefetch.ts), fetches an
// image's signatures with it (pull_signatures.ts) and keeps a capped repository under its
// `max_cache_bytes` by evicting the least recently used images (cache_cap.ts, eviction.ts).
// It stands on storage, metadata, jobs and upstream; the registry builds it and hands it its
// manifests and signature rules through narrow ports (ports.ts), so it never imports the
// registry back.
export {
  CACHE_FILL_KIND,
  PullThrough,
  type PullThroughDeps,
  type PullThroughResult,
  STALE_WARNING,
} from "./pull_through.ts";
export { Fills } from "./blob_fill.ts";
export { CACHE_HOLD_MS, CacheCap, type CacheCapDeps } from "./cache_cap.ts";
export type { CacheManifests, PulledBlob, PulledManifest, SignatureSources } from "./ports.ts";
