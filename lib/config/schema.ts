// The configuration as the server uses it, with every default filled in.

export interface RepositoryConfig {
  name: string;
  immutableTags?: boolean;
  immutableTagsExclusions?: RegExp[];
  /** the `?ns=` value this repository serves */
  namespace?: string;
}

export interface Config {
  server: { bindAddress: string; port: number };
  blobStore: { fs: { rootDir: string } };
  metadataStore: { path: string };
  global: {
    /** bytes; null = unlimited */
    maxBlobSize: number | null;
    maxManifestSize: number;
    allowMissingManifestReferences: boolean;
    immutableTags: boolean;
    immutableTagsExclusions: RegExp[];
    accessPolicyDefault: "allow" | "deny";
  };
  repositories: Map<string, RepositoryConfig>;
  /** files the config was read from, for the startup line */
  sources: string[];
}

export const DEFAULT_MAX_MANIFEST_SIZE = 4 * 1024 * 1024;

export function defaultConfig(): Config {
  return {
    server: { bindAddress: "0.0.0.0", port: 5000 },
    blobStore: { fs: { rootDir: "./data/blobs" } },
    metadataStore: { path: "./data/metadata.kv" },
    global: {
      maxBlobSize: null,
      maxManifestSize: DEFAULT_MAX_MANIFEST_SIZE,
      allowMissingManifestReferences: true,
      immutableTags: false,
      immutableTagsExclusions: [],
      accessPolicyDefault: "allow",
    },
    repositories: new Map(),
    sources: [],
  };
}
