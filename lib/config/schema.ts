// The configuration as the server uses it, with every default filled in.
import type {
  AuthWebhookConfig,
  EventWebhookConfig,
  RetentionPolicyConfig,
  RetentionScheduleConfig,
} from "./hooks.ts";
import type { SyncConfig } from "./sync.ts";
import type { RateLimitConfig } from "./rate_limit.ts";
import { defaultQuotaConfig, type QuotaConfig } from "./quota.ts";
import type { VerifyConfig } from "./verify.ts";

export interface PolicyConfig {
  default: "allow" | "deny";
  rules: string[];
}

export interface TlsConfig {
  serverCertificateBundle: string;
  serverPrivateKey: string;
  /** CA bundle that client certificates must chain to; null = no client certificates */
  clientCaBundle: string | null;
  clientAuth: "none" | "optional" | "required";
}

export interface BasicIdentityConfig {
  /** the `<id>` of `[auth.identity.<id>]` */
  id: string;
  username: string;
  /** argon2id PHC string */
  password: string;
}

export interface OidcProviderConfig {
  /** the `<name>` of `[auth.oidc.<name>]`; also the Basic username of OIDC-via-Basic */
  name: string;
  issuer: string;
  /** discovered from `<issuer>/.well-known/openid-configuration` when null */
  jwksUri: string | null;
  /** accepted `aud` values; empty = audience not checked */
  audience: string[];
  /** claim → required value (a string, or any of a list); an array claim must contain it */
  requiredClaims: Record<string, string | string[]>;
  /**
   * the claim `identity.username` is read from (default `sub`); `email` counts only with
   * `email_verified: true`
   */
  usernameClaim?: string;
  /** `[global] outbound_allow`, copied here by load.ts */
  outboundAllow?: string[];
}

/** `[blob_store.s3]`: bytes in an S3-compatible bucket instead of `[blob_store.fs]`. */
export interface S3StoreConfig {
  endpoint: string;
  bucket: string;
  region: string;
  accessKeyId: string;
  secretKey: string;
  /** from AWS_SESSION_TOKEN (temporary credentials) */
  sessionToken: string | null;
  keyPrefix: string;
  multipartPartSize: number;
  presignTtlSecs: number;
  pathStyle: boolean;
}

export interface TokenServiceConfig {
  secretKey: string;
  /** null: derived per request from Host / X-Forwarded-* (one config for every replica) */
  realm: string | null;
  service: string;
  ttlSecs: number;
}

/** One `[[repository."<name>".upstream]]` entry of a pull-through cache. */
export interface UpstreamConfig {
  /** base URL; a path replaces the repository prefix (`<path>/x`), a bare host drops it (`x`) */
  url: string;
  username: string | null;
  password: string | null;
  /** PEM file of extra CAs to trust for this upstream */
  caBundle: string | null;
  /** until response headers arrive */
  connectTimeoutSecs: number;
  /** longest stall between two reads of a body */
  readTimeoutSecs: number;
  /** redirects followed per request (blob downloads are often redirected to a CDN) */
  maxRedirects: number;
  /** `[global] outbound_allow`, copied here by load.ts */
  outboundAllow?: string[];
}

export const JOB_QUEUES = ["cache", "replication", "scan", "index", "events"] as const;
export type QueueName = typeof JOB_QUEUES[number];

export interface JobQueueConfig {
  /** attempts before a job is dead-lettered */
  maxAttempts: number;
  backoffMinMs: number;
  backoffMaxMs: number;
  /** a claimed job's lease; renewed while it runs, taken over once expired */
  leaseSecs: number;
  /** how often an idle worker lists a queue's due jobs */
  pollIntervalMs: number;
  /** jobs of a queue run at once per process (0: this process does not drain it) */
  concurrency: Record<QueueName, number>;
}

/** `[global.index]`: the layer index (browsing, file reads, secrets). */
export interface IndexConfig {
  /** index new layers in the background when pushed: `hosted` repositories only, all, none */
  onPush: "hosted" | "all" | "none";
  /** larger layers get a final "too large" outcome instead of an index */
  maxLayerSize: number;
  /** decompression stops (final error) past this many bytes: a bound for gzip bombs */
  maxUncompressedSize: number;
  maxEntries: number;
  /**
   * decompression stops (the job fails) past this many times the compressed size, once past
   * UNCOMPRESSED_RATIO_FLOOR: a 1,000:1 bomb trips in seconds, not at max_uncompressed_size
   */
  maxUncompressedRatio: number;
  /** an entry whose path is longer (UTF-8 bytes) fails the job */
  maxPathBytes: number;
  /** bytes of one file scanned for secrets; the rest of the file is not scanned */
  maxSecretScanBytes: number;
  /** where the walk runs: a child process with budgets, or (tests, restricted runtimes) here */
  sandbox: SandboxMode;
  budget: SandboxBudget;
}

/** `[blob_store.fs]` / `[blob_store.s3]` (S3 when set). */
export interface BlobStoreConfig {
  fs: { rootDir: string };
  s3: S3StoreConfig | null;
  /**
   * `[blob_store] min_free_bytes`: below this many free bytes on the blob store's filesystem (fs)
   * or the KV file's, new uploads are refused (503) so deletes, scrub and metadata commits keep
   * room; absent or null: 1% of the filesystem, at most 256 MiB; 0: no reserve.
   */
  minFreeBytes?: number | null;
}

/** Where untrusted content is parsed (docs/design.md, "Untrusted content"). */
export type SandboxMode = "process" | "worker" | "off";

/** Per-job limits of a sandboxed parse: a job past any of them is stopped and fails at once. */
export interface SandboxBudget {
  wallSecs: number;
  cpuSecs: number;
  /** resident memory of the sandbox (its V8 heap is capped below it) */
  memoryBytes: number;
}

/** Below this, the ratio budget does not apply (small layers of zeros are ordinary). */
export const UNCOMPRESSED_RATIO_FLOOR = 1024 ** 3;

export function defaultIndexConfig(): IndexConfig {
  return {
    onPush: "hosted",
    maxLayerSize: 16 * 1024 ** 3,
    maxUncompressedSize: 64 * 1024 ** 3,
    maxEntries: 1_000_000,
    maxUncompressedRatio: 200,
    maxPathBytes: 16 * 1024,
    maxSecretScanBytes: 16 * 1024 * 1024,
    sandbox: "process",
    budget: { wallSecs: 1800, cpuSecs: 1800, memoryBytes: 1024 ** 3 },
  };
}

/** osv.dev's public bucket: `<base>/<Ecosystem>/all.zip` per ecosystem. */
export const OSV_BUCKET = "https://osv-vulnerabilities.storage.googleapis.com";

/**
 * A top-level OSV ecosystem as osv.dev names its folders (`Debian`, `Rocky Linux`, `crates.io`):
 * it becomes a path segment of the URL and of `advisories_dir`, so no `/`, `:` or `..`.
 */
export function isEcosystemName(s: string): boolean {
  return /^[A-Za-z0-9][A-Za-z0-9 ._+-]{0,63}$/.test(s) && !s.includes("..");
}

/** `[scan]`: image reports (packages, advisories, config secrets). */
export interface ScanConfig {
  /** OSV dumps: `<Ecosystem>/all.zip` or folders of OSV JSON; null = no advisory data */
  advisoriesDir: string | null;
  /** scan platform images when pushed (hosted repositories) */
  onPush: boolean;
  /** how often the advisory files are checked for changes */
  reloadIntervalSecs: number;
  /** base of `<Ecosystem>/all.zip` downloads (osv.dev's bucket); "" = never download */
  advisoriesUrl: string;
  /** download into `advisoriesDir` this often; null = never on its own (`main.ts advisories fetch`) */
  refreshIntervalSecs: number | null;
  /** ecosystems downloaded besides those of the images held (`npm`, `PyPI`, ...) */
  advisoriesEcosystems: string[];
  /** PEM file of extra CAs for `advisoriesUrl` (a TLS-inspecting proxy, a private mirror) */
  advisoriesCaBundle: string | null;
  /** package databases larger than this are reported as skipped */
  maxDatabaseSize: number;
  /** packages listed per image; the rest are left out with a warning */
  maxPackages: number;
  /** layer entries of both images of a diff together; larger pairs are not compared */
  maxDiffEntries: number;
  /** where package databases are parsed (as `[global.index] sandbox`) */
  sandbox: SandboxMode;
  budget: SandboxBudget;
}

export function defaultScanConfig(): ScanConfig {
  return {
    advisoriesDir: null,
    onPush: true,
    reloadIntervalSecs: 300,
    advisoriesUrl: OSV_BUCKET,
    refreshIntervalSecs: null,
    advisoriesEcosystems: [],
    advisoriesCaBundle: null,
    maxDatabaseSize: 256 * 1024 * 1024,
    maxPackages: 25_000,
    maxDiffEntries: 300_000,
    sandbox: "process",
    budget: { wallSecs: 600, cpuSecs: 600, memoryBytes: 2 * 1024 ** 3 },
  };
}

/** `prefetch_max_bytes` of a pull-through repository that does not set it. */
export const DEFAULT_PREFETCH_MAX_BYTES = 4 * 1024 * 1024;

export interface RepositoryConfig {
  name: string;
  accessPolicy?: PolicyConfig;
  immutableTags?: boolean;
  immutableTagsExclusions?: RegExp[];
  /** the `?ns=` value this repository serves */
  namespace?: string;
  /** pull-through cache: upstreams tried in order; empty = a hosted repository */
  upstreams?: UpstreamConfig[];
  /** a mutable cached tag checked against the upstream this recently is served without a HEAD */
  revalidateSecs?: number;
  /** replication: registries every write here is mirrored to */
  downstreams?: DownstreamConfig[];
  /** an [auth.webhook.<name>] asked after the CEL policies allow (global's when unset) */
  authorizationWebhook?: string;
  /** replaces the global retention policy for this repository's namespaces */
  retentionPolicy?: RetentionPolicyConfig;
  /** scheduled pull sync (pull-through repositories only) */
  syncs?: SyncConfig[];
  /** `[repository."<name>".quota] max_bytes`: replaces [global.quota]'s limit */
  quotaMaxBytes?: number;
  /** pull-through only: least recently pulled images are evicted to keep the cache under it */
  maxCacheBytes?: number;
  /** pull-through only: blobs of a fetched manifest up to this size are filled ahead of the
   * client's GETs (lib/pull_through/prefetch.ts); 0 = none */
  prefetchMaxBytes?: number;
  /** `[repository."<name>".rate_limit]`: replaces the global numbers it sets, in its own buckets */
  rateLimit?: RateLimitConfig;
  /** `[repository."<name>".verify]`: signatures required before an image is visible; null/absent = none */
  verify?: VerifyConfig | null;
}

export type ReplicationMode = "event" | "event+reconcile" | "reconcile";

/** `[[repository."<name>".downstream]]`: connection settings as for an upstream, plus these. */
export interface DownstreamConfig extends UpstreamConfig {
  /** unique across the config; jobs name their downstream by it */
  name: string;
  /** full-match regexes over the local namespace; empty = every namespace of the repository */
  namespaceFilter: RegExp[];
  mode: ReplicationMode;
  /** reconcile also deletes downstream tags that are absent locally */
  prune: boolean;
  /** blob transfers of one job at a time */
  maxConcurrentTransfers: number;
  /** how often the server reconciles (modes with reconcile) */
  reconcileIntervalSecs: number;
  /**
   * origins besides `url`'s where the downstream may send blob uploads (its upload `Location`):
   * registries whose data plane is another host; absent or empty: the downstream's origin only
   */
  uploadHosts?: string[];
}

export const DOWNSTREAM_DEFAULTS = {
  mode: "event+reconcile" as ReplicationMode,
  prune: false,
  maxConcurrentTransfers: 4,
  reconcileIntervalSecs: 3600,
};

export interface Config {
  server: {
    bindAddress: string;
    port: number;
    tls: TlsConfig | null;
    /** IPs/CIDRs whose X-Forwarded-For is believed */
    trustedProxies: string[];
  };
  auth: {
    identities: BasicIdentityConfig[];
    oidc: Map<string, OidcProviderConfig>;
    tokenService: TokenServiceConfig | null;
    /** `[auth.webhook.<name>]` */
    webhooks: Map<string, AuthWebhookConfig>;
  };
  blobStore: BlobStoreConfig;
  /** `url` (a remote KV over KV Connect) replaces `path` when set */
  metadataStore: { path: string; url: string | null };
  global: {
    /** bytes; null = unlimited */
    maxBlobSize: number | null;
    maxManifestSize: number;
    allowMissingManifestReferences: boolean;
    immutableTags: boolean;
    immutableTagsExclusions: RegExp[];
    accessPolicy: PolicyConfig;
    /** record each manifest pull (pull history, last_pulled_at); off by default */
    updatePullTime: boolean;
    /** pull history entries scrub keeps per target (the newest is always kept) */
    maxPulls: number;
    /** pull history entries older than this are dropped by scrub; null = no age bound */
    maxAgeSecs: number | null;
    /** concurrent KV reads issued by the extension listings */
    listingReadConcurrency: number;
    /** upload sessions idle longer than this are reclaimed by scrub */
    uploadTimeoutSecs: number;
    /** blob GETs answer 307 to a presigned URL when the store has them (S3) */
    enableBlobRedirect: boolean;
    /** IPs/CIDRs an answer (redirect, token realm, jwks_uri) may send outbound requests to
     * although they are loopback, link-local or metadata addresses */
    outboundAllow: string[];
    /** manifest GETs whose body lives in the blob store answer 307 likewise */
    enableManifestRedirect: boolean;
    scrub: {
      /** run scrub inside the server every interval; null = off */
      intervalSecs: number | null;
      /** unreferenced bytes younger than this are kept (an upload may be about to use them) */
      graceSecs: number;
    };
    /**
     * `[global.integrity]`: re-hashing stored blobs (lib/registry/verify.ts, the `verify`
     * command); not `[global.verify]`, which would read as the default of the signature checks
     * of `[repository."<name>".verify]`
     */
    integrity: {
      /** start (or go on with) a verify pass inside the server this often; null = off */
      intervalSecs: number | null;
      /** bytes hashed per second at most, by the schedule and by default by the command */
      bytesPerSec: number;
    };
    jobQueue: JobQueueConfig;
    index: IndexConfig;
    /** an [auth.webhook.<name>] asked after the CEL policies allow; null = none */
    authorizationWebhook: string | null;
    retentionPolicy: RetentionPolicyConfig | null;
    retentionSchedule: RetentionScheduleConfig;
    /** `[global.rate_limit]`: token buckets per identity; null = off */
    rateLimit: RateLimitConfig | null;
    /** `[global.quota]`: storage limits per repository; off by default */
    quota: QuotaConfig;
    /** `[global.audit]`: the audit trail of writes, admin acts and denials; off by default */
    audit: AuditConfig;
  };
  /** `[event_webhook.<name>]` */
  eventWebhooks: EventWebhookConfig[];
  scan: ScanConfig;
  ui: {
    /** serve the web UI on non-API paths (with no config file at all: on) */
    enabled: boolean;
    name: string;
    /** UI sign-in; the provider must be a configured [auth.oidc.<name>] */
    oidc: { provider: string; clientId: string; scopes: string } | null;
  };
  repositories: Map<string, RepositoryConfig>;
  /** files the config was read from, for the startup line */
  sources: string[];
}

export interface AuditConfig {
  enabled: boolean;
  /** records older than this are dropped by scrub; null = kept */
  maxAgeDays: number | null;
  /** denial records one process writes per minute at most (the rest are counted, not stored) */
  maxDenialsPerMinute: number;
}

export const DEFAULT_MAX_MANIFEST_SIZE = 4 * 1024 * 1024;
/** 16 MiB/s: a TB in ~18 hours, a tenth of a disk's sequential reads (docs/operations.md). */
export const DEFAULT_VERIFY_BYTES_PER_SEC = 16 * 1024 * 1024;

export function defaultConfig(): Config {
  return {
    server: { bindAddress: "0.0.0.0", port: 5000, tls: null, trustedProxies: [] },
    auth: { identities: [], oidc: new Map(), tokenService: null, webhooks: new Map() },
    blobStore: { fs: { rootDir: "./data/blobs" }, s3: null, minFreeBytes: null },
    metadataStore: { path: "./data/metadata.kv", url: null },
    global: {
      maxBlobSize: null,
      maxManifestSize: DEFAULT_MAX_MANIFEST_SIZE,
      allowMissingManifestReferences: true,
      immutableTags: false,
      immutableTagsExclusions: [],
      accessPolicy: { default: "allow", rules: [] },
      updatePullTime: false,
      maxPulls: 1000,
      maxAgeSecs: null,
      listingReadConcurrency: 16,
      uploadTimeoutSecs: 86400,
      enableBlobRedirect: true,
      outboundAllow: [],
      enableManifestRedirect: true,
      scrub: { intervalSecs: null, graceSecs: 300 },
      integrity: { intervalSecs: null, bytesPerSec: DEFAULT_VERIFY_BYTES_PER_SEC },
      jobQueue: defaultJobQueue(),
      index: defaultIndexConfig(),
      authorizationWebhook: null,
      retentionPolicy: null,
      retentionSchedule: { intervalSecs: null, dryRun: false },
      rateLimit: null,
      quota: defaultQuotaConfig(),
      audit: { enabled: false, maxAgeDays: null, maxDenialsPerMinute: 60 },
    },
    eventWebhooks: [],
    scan: defaultScanConfig(),
    ui: { enabled: false, name: "Wharf", oidc: null },
    repositories: new Map(),
    sources: [],
  };
}

export function defaultJobQueue(): JobQueueConfig {
  return {
    maxAttempts: 5,
    backoffMinMs: 500,
    backoffMaxMs: 60_000,
    leaseSecs: 30,
    pollIntervalMs: 1000,
    concurrency: { cache: 4, replication: 2, scan: 1, index: 1, events: 4 },
  };
}

export const UPSTREAM_DEFAULTS = {
  connectTimeoutSecs: 30,
  readTimeoutSecs: 300,
  maxRedirects: 5,
} as const;

export * from "./hooks.ts";
export { SYNC_DEFAULTS, type SyncConfig, unsafePattern } from "./sync.ts";
export { RATE_LIMIT_DEFAULTS, type RateLimitConfig } from "./rate_limit.ts";
export { type QuotaConfig } from "./quota.ts";
export {
  type NotationTrust,
  parseDn,
  type SigstoreIdentity,
  type SigstoreTrust,
  type StringMatch,
  type TrustedKey,
  VERIFY_DEFAULTS,
  type VerifyConfig,
  type VerifyMode,
} from "./verify.ts";
