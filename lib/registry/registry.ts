// The Registry: the OCI operations (blobs, uploads, manifests, listings, pull-through, pulls)
// composed from the blob store and the metadata KV, which it keeps to itself. Routes talk to
// this; the layer index, reports, replication, sync and retention get their narrow dependencies
// from the composition root (lib/services) instead of reaching through it.
import type { Config } from "../config/mod.ts";
import { type BlobStore, CorruptBlobError, readVerified } from "../storage/mod.ts";
import { Quarantine } from "./quarantine.ts";
import { BlobMeta, ManifestMeta, UploadMeta } from "../metadata/mod.ts";
import { PullMeta, SvcMeta, UpstreamChecks } from "../metadata/mod.ts";
import { K } from "../kv/mod.ts";
import { CacheMeta, SignatureMeta, UsageLedger } from "../metadata/mod.ts";
import { type SignatureObserver, Signatures } from "./signatures.ts";
import type { Viewer } from "./signature_rules.ts";
import { maxBytesOf, quotaPolicy, quotasConfigured } from "../quota/mod.ts";
import { Pulls } from "./pulls.ts";
import { SvcListings } from "./svc_listings.ts";
import { Blobs } from "./blobs.ts";
import { Listings } from "./listings.ts";
import { BodyUnavailableError, type ManifestBody, Manifests } from "./manifests.ts";
import { Uploads } from "./uploads.ts";
import { JobQueues } from "../jobs/mod.ts";
import type { ObserveFn } from "../upstream/mod.ts";
import { RegistryError } from "../oci/mod.ts";
import {
  CACHE_FILL_KIND,
  CacheCap,
  Fills,
  type PulledManifest,
  PullThrough,
  type PullThroughResult,
} from "../pull_through/mod.ts";
import type { BlobRead } from "./blobs.ts";
import { cosignSignatureTag, referrerFormat } from "./signature_rules.ts";
import type { ReferrerDescriptor } from "./listings.ts";
import { EventEffects, Events } from "../events/mod.ts";
import { composeEffects, type WriteEffects } from "../effects/mod.ts";

export interface RegistryOptions {
  /** default: queues over `kv` with the configured [global.job_queue] */
  jobs?: JobQueues;
  observeUpstream?: ObserveFn;
  observePullThrough?: (
    kind: "manifest" | "blob",
    result: PullThroughResult,
  ) => void;
  /** verdicts, holds and verification time (issue 34) */
  observeSignatures?: SignatureObserver;
  /** images a capped pull-through repository evicted (max_cache_bytes) */
  observeEvictions?: (repository: string, images: number) => void;
  /** how long a pull stamp keeps a cached image in use (default a minute; tests shorten it) */
  cacheHoldMs?: number;
  /** why the blob store takes no new bytes now, or null (StoreWatch.blobRefusal) */
  blobRefusal?: () => Promise<string | null>;
  /**
   * What writes cause (lib/services/write_effects.ts composes events, replication, index and
   * scan), given this registry's queues and events. Default: events and audit records only.
   */
  effects?: (parts: { jobs: JobQueues; events: Events }) => WriteEffects;
}

/** A manifest as `readManifest` answers it: hosted (maybe a redirect) or pulled through. */
export type ServedManifest = ManifestBody & Pick<PulledManifest, "warning">;

/** A repository's storage for metrics: bytes used, its quota and its cache cap (null: none). */
export interface UsageFigures {
  repository: string;
  used: number;
  quota: number | null;
  cache: number | null;
}
export class Registry {
  readonly blobs: Blobs;
  readonly uploads: Uploads;
  readonly manifests: Manifests;
  readonly listings: Listings;
  readonly pulls: Pulls;
  readonly svc: SvcListings;
  readonly jobs: JobQueues;
  readonly pullThrough: PullThrough;
  /** event webhooks: what writes plan, and the `events` queue's delivery jobs */
  readonly events: Events;
  /** stored bytes that failed verification, out of serving (quarantine.ts; `verify` uses it) */
  readonly quarantine: Quarantine;
  /** what a write causes, planned into its commits (lib/effects) */
  readonly effects: WriteEffects;
  /** verified before visible: verdicts, holds and the pull gate (issue 34) */
  readonly signatures: Signatures;
  /** storage usage per repository, kept by the writes; quotas (lib/quota) */
  readonly #usage: UsageLedger;
  /** for the readiness probe; other parts get their share of the KV from lib/services */
  readonly #kv: Deno.Kv;

  constructor(
    readonly cfg: Config,
    kv: Deno.Kv,
    store: BlobStore,
    options: RegistryOptions = {},
  ) {
    this.#kv = kv;
    this.jobs = options.jobs ?? new JobQueues(kv, cfg.global.jobQueue);
    this.events = new Events(cfg, this.jobs, kv);
    this.effects = options.effects?.({ jobs: this.jobs, events: this.events }) ??
      composeEffects([new EventEffects(this.events)]);
    this.#usage = new UsageLedger(kv, quotaPolicy(() => cfg));
    const blobMeta = new BlobMeta(kv, this.#usage);
    const manifestMeta = new ManifestMeta(kv, this.#usage);
    this.quarantine = new Quarantine({
      cfg,
      kv,
      store,
      usage: this.#usage,
      events: this.events,
      refetch: (ns, digest) => this.pullThrough.refetch(ns, digest),
      pullThrough: (ns) => this.pullThrough.repository(ns) !== null,
    });
    this.blobs = new Blobs(store, blobMeta, manifestMeta, this.effects, {
      quarantine: this.quarantine,
      manifestBody: (ns, digest, rev) => this.manifests.body(digest, rev, ns),
    });
    this.manifests = new Manifests(
      cfg,
      store,
      manifestMeta,
      blobMeta,
      this.effects,
      this.#usage,
      this.quarantine,
    );
    this.uploads = new Uploads({
      store,
      blobs: blobMeta,
      uploads: new UploadMeta(kv, this.#usage),
      maxBlobSize: cfg.global.maxBlobSize,
      usage: this.#usage,
      effects: this.effects,
    });
    this.signatures = new Signatures({
      cfg,
      meta: new SignatureMeta(kv),
      manifests: manifestMeta,
      body: (ns, digest, rev) => this.manifests.body(digest, rev, ns),
      blob: async (ns, digest, maxBytes) => {
        const link = await blobMeta.link(ns, digest);
        if (!link) {
          throw new RegistryError("BLOB_UNKNOWN", `${digest} is not in ${ns}`);
        }
        if (link.size > maxBytes) {
          throw new RegistryError(
            "BLOB_UNKNOWN",
            `${digest} is larger than ${maxBytes} bytes`,
          );
        }
        return await readVerified(store, digest);
      },
      events: this.events,
      effects: this.effects,
      isImmutable: (ns, tag) => this.manifests.isImmutable(ns, tag),
      deleteImage: (ns, digest) => this.manifests.delete(ns, digest, null),
      fetchUpstream: (ns, digest) => {
        const rc = this.pullThrough.repository(ns);
        return rc ? this.pullThrough.fetchSignatures(rc, ns, digest) : null;
      },
      mirrored: (ns) => this.pullThrough.repository(ns) !== null,
      observe: options.observeSignatures,
    });
    this.manifests.signing = this.signatures;
    this.listings = new Listings(manifestMeta, this.manifests);
    const pullMeta = new PullMeta(kv);
    this.pulls = new Pulls(cfg, pullMeta);
    this.svc = new SvcListings(
      cfg,
      manifestMeta,
      new SvcMeta(kv),
      pullMeta,
      (d) => readVerified(store, d),
      {
        shown: () => quotasConfigured(cfg),
        used: (r) => this.#usage.used(r),
        quota: (r) => maxBytesOf(cfg, r),
      },
    );
    this.svc.verdicts = (ns, digests) => this.signatures.rowStates(ns, digests);
    // `max_cache_bytes` eviction of pull-through repositories
    const cacheCap = new CacheCap({
      cfg: () => cfg,
      usage: this.#usage,
      meta: new CacheMeta(kv),
      manifests: this.manifests,
      blobs: blobMeta,
      observe: options.observeEvictions,
      holdMs: options.cacheHoldMs,
    });
    this.pullThrough = new PullThrough({
      cacheCap,
      cfg,
      blobs: blobMeta,
      manifests: this.manifests,
      bodyUnavailable: (e) => e instanceof BodyUnavailableError,
      signatureSources: {
        cosignTag: cosignSignatureTag,
        isSignature: (artifactType, mediaType) => referrerFormat(artifactType, mediaType) !== null,
      },
      checks: new UpstreamChecks(kv),
      fills: new Fills({
        store,
        blobs: blobMeta,
        maxBlobSize: cfg.global.maxBlobSize,
        usage: this.#usage,
      }),
      jobs: this.jobs,
      blobRefusal: options.blobRefusal,
      observeUpstream: options.observeUpstream,
      observe: options.observePullThrough,
    });
  }

  /** Registers the job kinds this registry runs; call before starting a runner. */
  registerJobHandlers(): void {
    this.jobs.handle(
      "cache",
      CACHE_FILL_KIND,
      (job) => this.pullThrough.fillJob(job),
    );
    this.events.register();
  }

  /**
   * Storage per repository (metrics): configured repositories with a quota or cap, and every
   * repository holding bytes, when any quota or cap is configured; none otherwise.
   */
  async usageFigures(): Promise<UsageFigures[]> {
    if (!quotasConfigured(this.cfg)) return [];
    const used = await this.#usage.all();
    for (const rc of this.cfg.repositories.values()) {
      if (rc.quotaMaxBytes !== undefined || rc.maxCacheBytes !== undefined) {
        if (!used.has(rc.name)) used.set(rc.name, 0);
      }
    }
    return [...used].map(([repository, n]) => ({
      repository,
      used: n,
      quota: maxBytesOf(this.cfg, repository),
      cache: this.cfg.repositories.get(repository)?.maxCacheBytes ?? null,
    }));
  }

  /** Refuses client writes to a pull-through repository (403 DENIED). */
  assertWritable(ns: string): void {
    this.pullThrough.assertWritable(ns);
  }

  /**
   * A manifest, from the upstreams when `ns` is a pull-through namespace. In a repository with
   * [verify] the verdict stored beside the revision decides (issue 34): a held image is served
   * to its pusher and roles granted get-held only (`viewer`), an unverified one in warn mode
   * with a Warning.
   */
  async readManifest(
    ns: string,
    reference: string,
    withBody: boolean,
    accept: string | null,
    noRedirect = false,
    viewer: Viewer | null = null,
  ): Promise<ServedManifest> {
    const rc = this.pullThrough.repository(ns);
    const redirect = !noRedirect && this.cfg.global.enableManifestRedirect;
    const verify = this.signatures.policyOf(ns);
    if (!rc) {
      if (!verify) return this.manifests.get(ns, reference, withBody, redirect);
      const g = await this.signatures.gate(ns, reference, viewer, verify);
      const m: ServedManifest = await this.manifests.serve(
        g.digest,
        g.rev,
        ns,
        withBody,
        redirect,
      );
      if (g.warning) m.warning = g.warning;
      return m;
    }
    const m = await this.pullThrough.manifest(
      rc,
      ns,
      reference,
      accept,
      withBody,
    );
    if (!verify) return m;
    const w = await this.signatures.gateDigest(ns, m.digest, viewer, verify);
    if (w) m.warning = m.warning ? `${m.warning}, ${w}` : w;
    return m;
  }

  /**
   * A blob (or range), filled from the upstreams when `ns` is a pull-through namespace. `sent`
   * settles once the answer has gone out (the server's completion signal, when it has one).
   */
  async readBlob(
    ns: string,
    digest: string,
    rangeHeader: string | null,
    withBody: boolean,
    noRedirect = false,
    sent: Promise<void> | null = null,
  ): Promise<BlobRead> {
    const redirect = !noRedirect && this.cfg.global.enableBlobRedirect;
    const rc = this.pullThrough.repository(ns);
    if (!rc) {
      return await this.blobs.read(ns, digest, rangeHeader, withBody, redirect);
    }
    const served = (r: BlobRead) => this.pullThrough.served(rc, ns, digest, r, sent);
    try {
      // A miss goes to the upstream: its BLOB_UNKNOWN is not answered, so it need not say why.
      return served(
        await this.blobs.read(ns, digest, rangeHeader, withBody, redirect, false),
      );
    } catch (e) {
      // Rotten bytes were quarantined (and unlinked) by the read: the upstream has them right.
      if (
        !(e instanceof RegistryError && e.code === "BLOB_UNKNOWN" ||
          e instanceof CorruptBlobError)
      ) {
        throw e;
      }
    }
    const r = await this.pullThrough.blob(
      rc,
      ns,
      digest,
      rangeHeader,
      withBody,
    );
    return served(
      r === "linked" ? await this.blobs.read(ns, digest, rangeHeader, withBody) : r,
    );
  }

  /** Referrers, merged with the upstream's for a pull-through namespace (rule 5). */
  async referrers(
    ns: string,
    subject: string,
    artifactType: string | null,
    last: string | null,
  ): Promise<{ manifests: ReferrerDescriptor[]; next: string | null }> {
    const rc = this.pullThrough.repository(ns);
    let upstream: ReferrerDescriptor[] = [];
    // A malformed subject or filter is answered by the listing itself, without asking upstream.
    if (rc && this.listings.validReferrersQuery(subject, artifactType)) {
      upstream = await this.pullThrough.referrers(
        rc,
        ns,
        subject,
        artifactType,
      );
    }
    return await this.listings.referrers(
      ns,
      subject,
      artifactType,
      last,
      upstream,
    );
  }

  /** Releases upstream connections (after the job runners stopped). */
  close(): Promise<void> {
    this.pullThrough.close();
    return Promise.resolve();
  }

  /** Readiness: one bounded KV listing, no namespace walk and no blob store probe. */
  async ready(): Promise<void> {
    for await (const _ of this.#kv.list({ prefix: K.nsAll() }, { limit: 1 })) {
      break;
    }
  }
}
