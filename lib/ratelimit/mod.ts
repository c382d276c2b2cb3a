// Rate limits (issue 26, part 3): which token buckets a request draws from, GCRA arithmetic, and
// buckets shared by every process on one KV.
export {
  type LimitClass,
  type LimiterHooks,
  type LimitRequest,
  PULL_WINDOW_SECS,
  RateLimiter,
} from "./limiter.ts";
export { type Bucket, merge, take, tokensLeft, type Verdict } from "./gcra.ts";
export { type BucketRef, type KvCounts, SharedBuckets } from "./shared_buckets.ts";
