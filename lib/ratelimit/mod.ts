export {
  type LimitClass,
  type LimiterHooks,
  type LimitRequest,
  PULL_WINDOW_SECS,
  RateLimiter,
} from "./limiter.ts";
export { type Bucket, merge, take, tokensLeft, type Verdict } from "./gcra.ts";
export { type BucketRef, type KvCounts, SharedBuckets } from "./shared_buckets.ts";
