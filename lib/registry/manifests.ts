// Manifest GET/PUT/DELETE (SPEC §Manifests rules 2-8), immutable tags and the receiving side
// of replication's last-writer-wins (X-Svc-Source-Timestamp rules 1-7).
//
// The parts, one job each: manifest_read.ts (a reference resolved, a revision served, its body
// checked on every read), manifest_put.ts (a client's push judged and committed, a fetched
// manifest stored) and manifest_delete.ts (a tag or a revision deleted, immutable tags, the
// source timestamp both writes honour); Manifests below is the one object the registry holds.
import type { Config } from "../config/mod.ts";
import type { BlobStore } from "../storage/mod.ts";
import type { BlobMeta, ManifestMeta, UsageLedger } from "../metadata/mod.ts";
import type { WriteEffects } from "../effects/mod.ts";
import type { Quarantine } from "./quarantine.ts";
import type { Signatures } from "./signatures.ts";
import { type ManifestDeps, ManifestReads } from "./manifest_read.ts";
import { ManifestPuts } from "./manifest_put.ts";
import { ManifestDeletes } from "./manifest_delete.ts";

export { BodyUnavailableError, type ManifestBody } from "./manifest_read.ts";
export { MAX_TAGS_PER_PUSH, type PutInput } from "./manifest_put.ts";
export type { DeleteOptions } from "./manifest_delete.ts";

export class Manifests {
  readonly #reads: ManifestReads;
  readonly #puts: ManifestPuts;
  readonly #deletes: ManifestDeletes;

  constructor(
    cfg: Config,
    store: BlobStore,
    meta: ManifestMeta,
    blobs: BlobMeta,
    /** the jobs and events a push or delete causes, committed with it */
    effects: WriteEffects,
    /** quotas: each commit admitted by the ledger with the manifest's bytes (usage.ts) */
    usage?: UsageLedger,
    /** bodies that fail their digest are quarantined (quarantine.ts) */
    quarantine?: Pick<Quarantine, "quarantine" | "flagInline" | "explain">,
  ) {
    const d: ManifestDeps = { cfg, store, meta, blobs, effects, usage, quarantine };
    this.#reads = new ManifestReads(d);
    this.#deletes = new ManifestDeletes(d, this.#reads);
    this.#puts = new ManifestPuts(d, this.#deletes);
  }

  /** signature verification (issue 34): set by the Registry once it is built */
  get signing(): Signatures | undefined {
    return this.#puts.signing;
  }
  set signing(s: Signatures | undefined) {
    this.#puts.signing = s;
  }

  // reading (manifest_read.ts)
  resolve(...a: Parameters<ManifestReads["resolve"]>) {
    return this.#reads.resolve(...a);
  }
  get(...a: Parameters<ManifestReads["get"]>) {
    return this.#reads.get(...a);
  }
  serve(...a: Parameters<ManifestReads["serve"]>) {
    return this.#reads.serve(...a);
  }
  body(...a: Parameters<ManifestReads["body"]>) {
    return this.#reads.body(...a);
  }

  // putting (manifest_put.ts)
  put(...a: Parameters<ManifestPuts["put"]>) {
    return this.#puts.put(...a);
  }
  storeFetched(...a: Parameters<ManifestPuts["storeFetched"]>) {
    return this.#puts.storeFetched(...a);
  }

  // deleting and immutable tags (manifest_delete.ts)
  isImmutable(...a: Parameters<ManifestDeletes["isImmutable"]>) {
    return this.#deletes.isImmutable(...a);
  }
  tagsOf(...a: Parameters<ManifestDeletes["tagsOf"]>) {
    return this.#deletes.tagsOf(...a);
  }
  delete(...a: Parameters<ManifestDeletes["delete"]>) {
    return this.#deletes.delete(...a);
  }
}
