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
    },
    repositories: new Map(),
    sources: [],
  };
}
