// Storage quotas and the cache cap (issue 26, parts 1–2): which limit applies where, and which
// cached images go first. The usage itself is kept by lib/metadata/usage.ts inside the writes.
export { maxBytesOf, quotaPolicy, quotasConfigured } from "./limits.ts";
export { type CachedImage, evictionOrder, lastUsed } from "./eviction.ts";
export { formatBytes, quotaExceeded } from "../metadata/mod.ts";
