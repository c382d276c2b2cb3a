// The blob-side records under lib/kv/keys.ts's keys: a blob's bytes stored (blob/), a namespace
// owning it (link/), an upload session (upload/) and scrub's reclamation marker (reclaim/). Their
// owner is lib/metadata (blobs.ts, uploads.ts, reclaim.ts); lib/registry reads them through it.

export interface ReclaimMarker {
  /** ms since epoch when scrub claimed the digest; a marker long past this is stale */
  at: number;
}

export interface BlobRecord {
  size: number;
  at: number;
}
export interface LinkRecord {
  size: number;
  at: number;
}
export interface UploadRecord {
  offset: number;
  /** the algorithm the session hashes under */
  algorithm: "sha256" | "sha512";
  /** set by `digest-algorithm`: closing with another algorithm is DIGEST_INVALID */
  pinned: boolean;
  startedAt: number;
  /** last time a chunk was committed (idle sessions are reclaimed by scrub) */
  updatedAt?: number;
}
