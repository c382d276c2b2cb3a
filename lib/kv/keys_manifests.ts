// The manifest-side records under lib/kv/keys.ts's keys: a revision (rev/), a tag (tag/), a
// referrer (referrer/), the pulls of a tag or digest (pullc/) and a pull-through tag's upstream
// check (upcheck/). Their owner is lib/metadata (manifests.ts, pulls.ts, upstream_checks.ts).

export interface RevisionRecord {
  mediaType: string;
  size: number;
  pushedAt: number;
  subject?: string;
  artifactType?: string;
  /** the manifest body when small enough to live in KV; otherwise it is in the blob store */
  body?: Uint8Array;
}
export interface TagRecord {
  digest: string;
  /** ms since epoch; absent for a tag with no recorded creation time (oldest for LWW) */
  createdAt?: number;
}
export interface ReferrerRecord {
  mediaType: string;
  size: number;
  artifactType?: string;
  annotations?: Record<string, string>;
}

/** Manifest bodies up to this size are stored inline in their KV revision record. */
export const INLINE_MANIFEST_MAX = 48 * 1024;

export interface UpstreamCheck {
  /** ms since epoch */
  at: number;
  /** the digest the upstream named for the tag then */
  digest: string;
}

export interface PullEntry {
  /** the identity's username or id, or `anonymous` */
  client: string;
  /** ms since epoch */
  at: number;
}
export interface PullChunk {
  /** newest first */
  entries: PullEntry[];
}
