// The configuration as the server uses it, with every default filled in.

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
}

export interface TokenServiceConfig {
  secretKey: string;
  realm: string;
  service: string;
  ttlSecs: number;
}

export interface RepositoryConfig {
  name: string;
  accessPolicy?: PolicyConfig;
  immutableTags?: boolean;
  immutableTagsExclusions?: RegExp[];
  /** the `?ns=` value this repository serves */
  namespace?: string;
}

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
  };
  blobStore: { fs: { rootDir: string } };
  metadataStore: { path: string };
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
    scrub: {
      /** run scrub inside the server every interval; null = off */
      intervalSecs: number | null;
      /** unreferenced bytes younger than this are kept (an upload may be about to use them) */
      graceSecs: number;
    };
  };
  ui: {
    name: string;
    /** UI sign-in; the provider must be a configured [auth.oidc.<name>] */
    oidc: { provider: string; clientId: string; scopes: string } | null;
  };
  repositories: Map<string, RepositoryConfig>;
  /** files the config was read from, for the startup line */
  sources: string[];
}

export const DEFAULT_MAX_MANIFEST_SIZE = 4 * 1024 * 1024;

export function defaultConfig(): Config {
  return {
    server: { bindAddress: "0.0.0.0", port: 5000, tls: null, trustedProxies: [] },
    auth: { identities: [], oidc: new Map(), tokenService: null },
    blobStore: { fs: { rootDir: "./data/blobs" } },
    metadataStore: { path: "./data/metadata.kv" },
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
      scrub: { intervalSecs: null, graceSecs: 300 },
    },
    ui: { name: "Wharf", oidc: null },
    repositories: new Map(),
    sources: [],
  };
}
