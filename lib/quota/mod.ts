// Storage quotas (issue 26, part 1): which limit, quota or cache cap, applies to a repository.
// The usage itself is kept by lib/metadata/usage.ts inside the writes; which cached images a
// capped pull-through repository gives up first is the cache's (lib/pull_through/eviction.ts).
export { maxBytesOf, quotaPolicy, quotasConfigured } from "./limits.ts";
export { formatBytes, quotaExceeded } from "../metadata/mod.ts";
