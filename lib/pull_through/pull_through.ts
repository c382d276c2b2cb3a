// Pull-through caching (SPEC §What the service does 5, Blobs rule 8, Referrers rule 5, Tags;
// DESIGN.md Pull-through). A repository with upstreams serves every namespace under it from
// its cache, asking its upstreams (in order, lib/upstream) for what it lacks:
// - a manifest by digest, or a tag of an immutable repository, comes from the cache once cached;
// - a mutable tag is checked with a HEAD (at most once per revalidate_secs) and refetched when
//   its digest moved; when every upstream is down (unreachable, timeout, 5xx, 429) the cached
//   copy is served with a Warning (stale beats down);
// - manifests are stored byte-exact as served, after their digest was verified;
// - a blob is filled once (blob_fill.ts) while every client follows the fill; a range over an
//   uncached blob is forwarded upstream and the blob queued for a `cache` job;
// - once a client GETs a layer of a manifest fetched from the upstream, the manifest's other
//   blobs of at most `prefetch_max_bytes` are filled at once (prefetch.ts), so the client's GETs
//   for them follow fills already under way.
//
// The parts, one job each: pull_upstreams.ts (the upstream clients, rebuilt on a reload; which
// repository governs a namespace; an upstream failure as the client sees it), pull_manifests.ts
// (manifests: cached, revalidated, fetched, stale, refetched), pull_blobs.ts (blobs: followed
// fills, links, forwarded ranges, the `cache` job, prefetch) and pull_referrers.ts (upstream
// referrers and signatures); PullThrough below is the one object callers hold.
import type { RepositoryConfig } from "../config/mod.ts";
import { type PullThroughDeps, PullUpstreams } from "./pull_upstreams.ts";
import { PullManifests } from "./pull_manifests.ts";
import { PullBlobs } from "./pull_blobs.ts";
import { PullReferrers } from "./pull_referrers.ts";

export { type PullThroughDeps, type PullThroughResult } from "./pull_upstreams.ts";
export { STALE_WARNING } from "./pull_manifests.ts";
export { CACHE_FILL_DELAY_MS, CACHE_FILL_KIND, INSURE_AFTER_MS } from "./pull_blobs.ts";

export class PullThrough {
  readonly #upstreams: PullUpstreams;
  readonly #blobs: PullBlobs;
  readonly #manifests: PullManifests;
  readonly #referrers: PullReferrers;

  /** Builds the upstream clients now, so a bad ca_bundle fails at startup. */
  constructor(d: PullThroughDeps) {
    this.#upstreams = new PullUpstreams(d);
    this.#blobs = new PullBlobs(d, this.#upstreams);
    this.#manifests = new PullManifests(d, this.#upstreams, this.#blobs);
    this.#referrers = new PullReferrers(d, this.#upstreams, this.#blobs);
  }

  close(): void {
    this.#blobs.close();
    this.#upstreams.close();
  }

  // the upstreams and the repositories they serve (pull_upstreams.ts)
  prepareReload(...a: Parameters<PullUpstreams["prepareReload"]>) {
    return this.#upstreams.prepareReload(...a);
  }
  repository(...a: Parameters<PullUpstreams["repository"]>) {
    return this.#upstreams.repository(...a);
  }
  assertWritable(...a: Parameters<PullUpstreams["assertWritable"]>) {
    return this.#upstreams.assertWritable(...a);
  }

  // manifests (pull_manifests.ts)
  manifest(...a: Parameters<PullManifests["manifest"]>) {
    return this.#manifests.manifest(...a);
  }

  // blobs and fills (pull_blobs.ts)
  served<R extends { stream?: ReadableStream<Uint8Array> }>(
    rc: RepositoryConfig,
    ns: string,
    digest: string,
    read: R,
    sent: Promise<void> | null = null,
  ): R {
    return this.#blobs.served(rc, ns, digest, read, sent);
  }
  blob(...a: Parameters<PullBlobs["blob"]>) {
    return this.#blobs.blob(...a);
  }
  refetch(...a: Parameters<PullBlobs["refetch"]>) {
    return this.#blobs.refetch(...a);
  }
  fillJob(...a: Parameters<PullBlobs["fillJob"]>) {
    return this.#blobs.fillJob(...a);
  }
  ensureBlob(...a: Parameters<PullBlobs["ensureBlob"]>) {
    return this.#blobs.ensureBlob(...a);
  }

  // referrers and signatures (pull_referrers.ts)
  fetchSignatures(...a: Parameters<PullReferrers["fetchSignatures"]>) {
    return this.#referrers.fetchSignatures(...a);
  }
  referrers(...a: Parameters<PullReferrers["referrers"]>) {
    return this.#referrers.referrers(...a);
  }
}
