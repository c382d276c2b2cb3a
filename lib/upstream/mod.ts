// The client a pull-through cache uses to read remote OCI registries (DESIGN.md §Pull-through).
export { type AcceptItem, DEFAULT_MANIFEST_ACCEPT, forwardAccept, parseAccept } from "./accept.ts";
export { type Challenge, ChallengeSyntaxError, parseChallenges } from "./challenge.ts";
export {
  type BlobResponse,
  type FetchedManifest,
  type ManifestHead,
  type ObserveFn,
  UpstreamClient,
  type UpstreamClientOptions,
  type UpstreamOp,
  type UpstreamOutcome,
} from "./client.ts";
export { mayReceiveCredentials } from "./credential_scope.ts";
export {
  isUpstreamError,
  parseRetryAfter,
  UpstreamError,
  type UpstreamErrorKind,
  UpstreamSetError,
} from "./errors.ts";
export { pullScope, upstreamName } from "./paths.ts";
export { UpstreamSet } from "./set.ts";
export { parseRateLimit, type RateLimitHint, type TagListing } from "./tags.ts";
export { type IssuedToken, TokenCache } from "./token_cache.ts";
export { verifyDigest } from "./verify.ts";
// The HTTP layer, shared with replication's downstream client (which writes as well).
export { Authenticator, type Credentials } from "./auth.ts";
export { describeUrl, type Exchange, readBounded, Transport } from "./transport.ts";
