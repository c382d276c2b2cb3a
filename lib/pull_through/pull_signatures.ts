// The upstream's signatures of an image a pull-through repository with [verify] caches (issue
// 34): its cosign `.sig` tag and its sigstore/notation referrers, fetched with the image and
// stored beside it (their small blobs too) so the verdict is judged from local bytes, offline.
// Bounded: ARTIFACTS_MAX artifacts, SIGNATURE_BLOB_MAX per blob. A signature the upstream does
// not have, or cannot serve, is left out (the image then stays unverified, never served
// unverified in enforce).
import { parseManifest, RegistryError } from "../oci/mod.ts";
import type { RepositoryConfig } from "../config/mod.ts";
import { isUpstreamError, type UpstreamSet } from "../upstream/mod.ts";
import { log } from "../log.ts";
import type { CacheManifests, SignatureSources } from "./ports.ts";

/** Signature manifests fetched per image. */
const SIGNATURES_FETCHED = 16;
/** A signature's blob (payload, bundle, envelope) larger than this is not fetched. */
export const SIGNATURE_BLOB_MAX = 4 << 20;

export interface SignatureFetchDeps {
  manifests: Pick<CacheManifests, "storeFetched">;
  /** which of the upstream's artifacts are the image's signatures */
  sources: SignatureSources;
  maxManifestSize: number;
  /** `digest` stored and linked in `ns` (the pull-through's fill) */
  ensureBlob: (rc: RepositoryConfig, ns: string, digest: string) => Promise<unknown>;
}

/** Fetches and stores the upstream's signatures of `digest`; how many were stored. */
export async function fetchSignatures(
  d: SignatureFetchDeps,
  rc: RepositoryConfig,
  up: UpstreamSet,
  ns: string,
  digest: string,
): Promise<number> {
  let stored = 0;
  const store = async (reference: string, tag: string | null) => {
    const m = await up.getManifest(ns, reference, null, d.maxManifestSize);
    const parsed = parseManifest(m.bytes, null);
    for (const b of new Set(parsed.blobs)) {
      if ((parsed.blobSizes?.get(b) ?? Infinity) > SIGNATURE_BLOB_MAX) continue;
      await d.ensureBlob(rc, ns, b);
    }
    await d.manifests.storeFetched(ns, m.digest, m.bytes, m.mediaType, tag);
    stored++;
  };
  const quiet = (what: string, e: unknown) => {
    if (isUpstreamError(e) && e.kind === "not-found") return;
    log.warn("an upstream signature was not cached", {
      namespace: ns,
      digest,
      signature: what,
      error: e instanceof RegistryError ? e.detail : (e as Error).message,
    });
  };
  const tag = d.sources.cosignTag(digest);
  if (tag) {
    try {
      await store(tag, tag);
    } catch (e) {
      quiet(tag, e);
    }
  }
  let referrers: { digest: string; mediaType: string; artifactType?: string }[] = [];
  try {
    referrers = await up.getReferrers(ns, digest);
  } catch (e) {
    quiet("referrers", e);
  }
  for (const r of referrers) {
    if (stored >= SIGNATURES_FETCHED) break;
    if (!d.sources.isSignature(r.artifactType, r.mediaType)) continue;
    try {
      await store(r.digest, null);
    } catch (e) {
      quiet(r.digest, e);
    }
  }
  return stored;
}
