// The registry: OCI operations composed from storage and metadata. Routes talk only to this.
import type { Config } from "../config/schema.ts";
import type { BlobStore } from "../storage/blob_store.ts";
import { BlobMeta, ManifestMeta, UploadMeta } from "../metadata/mod.ts";
import { PullMeta, SvcMeta } from "../metadata/mod.ts";
import { Pulls } from "./pulls.ts";
import { SvcListings } from "./svc_listings.ts";
import { Blobs } from "./blobs.ts";
import { Listings } from "./listings.ts";
import { Manifests } from "./manifests.ts";
import { Uploads } from "./uploads.ts";

export { type BlobRead } from "./blobs.ts";
export { type ReferrerDescriptor, REFERRERS_PAGE } from "./listings.ts";
export { parseSourceTimestamp } from "./manifests.ts";
export { rangeHeaders, type StartResult } from "./uploads.ts";

export class Registry {
  readonly blobs: Blobs;
  readonly uploads: Uploads;
  readonly manifests: Manifests;
  readonly listings: Listings;
  readonly pulls: Pulls;
  readonly svc: SvcListings;

  constructor(readonly cfg: Config, readonly kv: Deno.Kv, readonly store: BlobStore) {
    const blobMeta = new BlobMeta(kv);
    const manifestMeta = new ManifestMeta(kv);
    this.blobs = new Blobs(store, blobMeta, manifestMeta);
    this.manifests = new Manifests(cfg, store, manifestMeta, blobMeta);
    this.uploads = new Uploads({
      store,
      blobs: blobMeta,
      uploads: new UploadMeta(kv),
      maxBlobSize: cfg.global.maxBlobSize,
    });
    this.listings = new Listings(manifestMeta, this.manifests);
    const pullMeta = new PullMeta(kv);
    this.pulls = new Pulls(cfg, pullMeta);
    this.svc = new SvcListings(cfg, manifestMeta, new SvcMeta(kv), pullMeta);
  }

  /** Readiness: one bounded KV listing, no namespace walk and no blob store probe. */
  async ready(): Promise<void> {
    for await (const _ of this.kv.list({ prefix: ["ns"] }, { limit: 1 })) break;
  }
}
export {
  formatSummary,
  type PullSweep,
  Scrubber,
  type ScrubOptions,
  type ScrubSummary,
} from "./scrub.ts";
export { sweepPullHistory } from "../metadata/mod.ts";
export { PULLS_DEFAULT_N, PULLS_MAX_N, type PullsPage } from "./pulls.ts";
export {
  type NamespacesListing,
  type RepositorySummary,
  type RevisionRow,
  type UiConfig,
} from "./svc_listings.ts";
