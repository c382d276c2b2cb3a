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
import {
  type Descriptor,
  parseDigest,
  type ParsedManifest,
  RegistryError,
  resolveRange,
  truncate,
  unavailable,
  upstreamFailed,
} from "../oci/mod.ts";
import { type Config, type RepositoryConfig, repositoryOf } from "../config/mod.ts";
import { type RevisionRecord } from "../kv/mod.ts";
import { type BlobMeta, NO_FACTS, type UpstreamChecks } from "../metadata/mod.ts";
import { type JobContext, type JobQueues, PermanentJobError } from "../jobs/mod.ts";
import {
  isUpstreamError,
  type ObserveFn,
  type UpstreamError,
  UpstreamSet,
} from "../upstream/mod.ts";
import { log } from "../log.ts";
import { type BlobFill, FillError, type Fills } from "./blob_fill.ts";
import { CorruptBlobError } from "../storage/mod.ts";
import type { CacheCap } from "./cache_cap.ts";
import { AwaitingLayer, Prefetcher, type PrefetchItem } from "./prefetch.ts";
import { fetchSignatures } from "./pull_signatures.ts";
import type { CacheManifests, PulledBlob, PulledManifest, SignatureSources } from "./ports.ts";

/** The Warning a stale manifest is served with (RFC 9111 warn-code 110). */
export const STALE_WARNING = '110 wharf "Response is Stale: every upstream is unavailable"';

/** The `cache` job that completes (or redoes) the fill of one blob into one namespace. */
export const CACHE_FILL_KIND = "fill-blob";

/**
 * A cache job waits this long before it runs: the fill a client started usually finishes
 * first (the job then only sees the blob linked); it matters when that process died mid-fill.
 */
export const CACHE_FILL_DELAY_MS = 30_000;

/** A fill still running after this long gets its `cache` job (see `insure`). */
export const INSURE_AFTER_MS = 250;

export type PullThroughResult =
  | "hit"
  | "miss"
  | "revalidated"
  | "refreshed"
  | "stale"
  | "linked"
  | "follow"
  | "range"
  /** a blob filled ahead of the client (prefetch.ts) */
  | "prefetch"
  /** a cached manifest whose stored body failed its digest, fetched again */
  | "refetched"
  | "error";

export interface PullThroughDeps {
  cfg: Config;
  blobs: BlobMeta;
  manifests: CacheManifests;
  /**
   * Whether `e`, thrown by `manifests.body`, says the stored body is gone or rotten (the read
   * quarantined it): the cache then fetches the manifest again instead of failing the pull.
   */
  bodyUnavailable: (e: unknown) => boolean;
  /** which signatures of an image are fetched with it (issue 34) */
  signatureSources: SignatureSources;
  checks: UpstreamChecks;
  fills: Fills;
  jobs: JobQueues;
  /** `max_cache_bytes`: eviction before fills, and the images it must not evict */
  cacheCap?: CacheCap;
  observeUpstream?: ObserveFn;
  observe?: (kind: "manifest" | "blob", result: PullThroughResult) => void;
}

interface FillPayload {
  namespace: string;
  digest: string;
}

export class PullThrough {
  private sets = new Map<string, UpstreamSet>();
  private readonly prefetcher = new Prefetcher((item, signal) => this.prefetchOne(item, signal));
  private readonly awaitingLayer = new AwaitingLayer();

  /** Builds the upstream clients now, so a bad ca_bundle fails at startup. */
  constructor(private readonly d: PullThroughDeps) {
    this.sets = this.build(d.cfg);
  }

  private build(cfg: Config): Map<string, UpstreamSet> {
    const sets = new Map<string, UpstreamSet>();
    for (const rc of cfg.repositories.values()) {
      if (rc.upstreams?.length) {
        sets.set(
          rc.name,
          new UpstreamSet(rc.name, rc.upstreams, { observe: this.d.observeUpstream }),
        );
      }
    }
    return sets;
  }

  /**
   * A config reload: builds the clients of `next`'s upstreams now (throws on a bad ca_bundle,
   * refusing the reload) and returns the switch to them. Old clients are closed a minute later,
   * when requests still using them are long done.
   */
  prepareReload(next: Config): () => void {
    const sets = this.build(next);
    return () => {
      const old = this.sets;
      this.sets = sets;
      const t = setTimeout(() => {
        for (const s of old.values()) s.close();
      }, 60_000);
      Deno.unrefTimer(t as unknown as number);
    };
  }

  close(): void {
    this.prefetcher.close();
    for (const s of this.sets.values()) s.close();
  }

  /** The pull-through repository governing `ns`, or null for a hosted namespace. */
  repository(ns: string): RepositoryConfig | null {
    const rc = repositoryOf(this.d.cfg, ns);
    return this.sets.has(rc.name) ? rc : null;
  }

  /** Client writes to a pull-through repository are refused: it mirrors its upstreams. */
  assertWritable(ns: string): void {
    const rc = this.repository(ns);
    if (!rc) return;
    throw new RegistryError(
      "DENIED",
      `repository ${rc.name} is a read-only pull-through cache of ${
        rc.upstreams!.map((u) => u.url).join(", ")
      }`,
    );
  }

  private set(rc: RepositoryConfig): UpstreamSet {
    return this.sets.get(rc.name)!;
  }

  async manifest(
    rc: RepositoryConfig,
    ns: string,
    reference: string,
    accept: string | null,
    withBody: boolean,
  ): Promise<PulledManifest> {
    const byDigest = parseDigest(reference) !== null;
    const local = await this.cached(ns, reference);
    if (local && (byDigest || this.immutable(rc, reference))) {
      this.d.observe?.("manifest", "hit");
      return await this.serveChecked(rc, ns, local, withBody, accept);
    }
    if (local && rc.revalidateSecs) {
      const seen = await this.d.checks.get(ns, reference);
      if (seen && seen.digest === local.digest && Date.now() - seen.at < rc.revalidateSecs * 1000) {
        this.d.observe?.("manifest", "hit");
        return await this.serveChecked(rc, ns, local, withBody, accept);
      }
    }
    const up = this.set(rc);
    try {
      if (local) {
        const head = await up.headManifest(ns, reference, accept);
        if (head.digest === local.digest) {
          await this.d.checks.record(ns, reference, local.digest);
          this.d.observe?.("manifest", "revalidated");
          return await this.serveChecked(rc, ns, local, withBody, accept);
        }
        // Moved upstream: fetch the new revision by its digest (the tag could move again).
        const fetched = await this.fetch(rc, up, ns, head.digest, accept, reference);
        this.d.observe?.("manifest", "refreshed");
        return fetched;
      }
      const fetched = await this.fetch(rc, up, ns, reference, accept, byDigest ? null : reference);
      this.d.observe?.("manifest", "miss");
      return fetched;
    } catch (e) {
      if (local && isUpstreamError(e) && e.down) {
        log.warn("serving a cached manifest: every upstream is down", {
          namespace: ns,
          reference: truncate(reference),
          error: e.message,
        });
        this.d.observe?.("manifest", "stale");
        return { ...(await this.serve(local, withBody)), warning: STALE_WARNING };
      }
      this.d.observe?.("manifest", "error");
      throw clientError(e, () =>
        new RegistryError(
          "MANIFEST_UNKNOWN",
          `${truncate(ns)}:${truncate(reference)} not found upstream (${upstreamMessage(e)})`,
        ));
    }
  }

  private async fetch(
    rc: RepositoryConfig,
    up: UpstreamSet,
    ns: string,
    reference: string,
    accept: string | null,
    tag: string | null,
  ): Promise<PulledManifest> {
    const m = await up.getManifest(ns, reference, accept, this.d.cfg.global.maxManifestSize);
    const cap = this.d.cacheCap;
    let rec: RevisionRecord;
    let parsed: ParsedManifest;
    try {
      const store = () => this.d.manifests.storeFetched(ns, m.digest, m.bytes, m.mediaType, tag);
      const stored = cap
        ? await cap.hold(ns, m.digest, async () => {
          await cap.makeRoom(rc, ns, m.bytes.byteLength, [m.digest]);
          const r = await store();
          cap.touched(rc, ns, m.digest);
          return r;
        })
        : await store();
      rec = stored.record;
      parsed = stored.parsed;
    } catch (e) {
      if (e instanceof RegistryError && e.code === "MANIFEST_INVALID") {
        throw upstreamFailed(
          `upstream served an unusable manifest for ${truncate(reference)}: ${e.detail}`,
        );
      }
      throw e;
    }
    this.awaitLayerGet(rc, ns, parsed);
    if (tag !== null) await this.d.checks.record(ns, tag, m.digest);
    return { digest: m.digest, mediaType: rec.mediaType, size: m.bytes.byteLength, body: m.bytes };
  }

  /**
   * Remembers the small blobs of a manifest just fetched: the first GET of one of its layers
   * queues them all (prefetch.ts). Not the manifest fetch itself: `skopeo inspect` and a sync's
   * completeness check read a manifest (and a config) without wanting its layers.
   */
  private awaitLayerGet(rc: RepositoryConfig, ns: string, parsed: ParsedManifest): void {
    const max = rc.prefetchMaxBytes ?? 0;
    if (max <= 0 || !parsed.blobSizes) return;
    const small = parsed.blobs.filter((d) => (parsed.blobSizes!.get(d) ?? Infinity) <= max);
    if (small.length === 0) return;
    this.awaitingLayer.add(ns, parsed.layers.map((l) => l.digest), small);
  }

  /** One queued prefetch: what a `cache` job does, without the job (prefetch.ts). */
  private async prefetchOne(item: PrefetchItem, signal: AbortSignal): Promise<void> {
    const rc = this.repository(item.ns);
    if (!rc || (rc.prefetchMaxBytes ?? 0) <= 0) return;
    if (await this.ensureBlob(rc, item.ns, item.digest, signal, false)) {
      this.d.observe?.("blob", "prefetch");
    }
  }

  private async cached(
    ns: string,
    reference: string,
  ): Promise<{ digest: string; rev: RevisionRecord } | null> {
    try {
      return await this.d.manifests.resolve(ns, reference);
    } catch (e) {
      if (e instanceof RegistryError && e.code === "MANIFEST_UNKNOWN") return null;
      throw e;
    }
  }

  private async serve(
    local: { digest: string; rev: RevisionRecord },
    withBody: boolean,
    rc?: RepositoryConfig,
    ns?: string,
  ): Promise<PulledManifest> {
    if (rc && ns) this.d.cacheCap?.touched(rc, ns, local.digest);
    // A GET's body is checked against its digest (Manifests.body); HEAD sends none.
    const body = withBody
      ? await this.d.manifests.body(local.digest, local.rev, ns ?? null)
      : local.rev.body ?? null;
    return { digest: local.digest, mediaType: local.rev.mediaType, size: local.rev.size, body };
  }

  /**
   * The cached copy; when its stored body fails its digest (the read quarantined it) or is gone
   * from the store for that reason, the upstream's, fetched again by digest: a cache never
   * serves rot, it refetches. Should the upstream not have it, the cached copy's error stands.
   */
  private async serveChecked(
    rc: RepositoryConfig,
    ns: string,
    local: { digest: string; rev: RevisionRecord },
    withBody: boolean,
    accept: string | null,
  ): Promise<PulledManifest> {
    try {
      return await this.serve(local, withBody, rc, ns);
    } catch (e) {
      if (!(e instanceof CorruptBlobError || this.d.bodyUnavailable(e))) throw e;
      log.warn("fetching a cached manifest again: its stored body failed verification", {
        namespace: ns,
        digest: local.digest,
      });
      try {
        const fetched = await this.fetch(rc, this.set(rc), ns, local.digest, accept, null);
        this.d.observe?.("manifest", "refetched");
        return fetched;
      } catch (e2) {
        this.d.observe?.("manifest", "error");
        throw clientError(e2, () => e as RegistryError);
      }
    }
  }

  /** A blob read of `ns` as served: under a cache cap it keeps its images in use while it streams. */
  served<R extends { stream?: ReadableStream<Uint8Array> }>(
    rc: RepositoryConfig,
    ns: string,
    digest: string,
    read: R,
    sent: Promise<void> | null = null,
  ): R {
    return this.d.cacheCap?.serving(rc, ns, digest, read, sent) ?? read;
  }

  private immutable(rc: RepositoryConfig, tag: string): boolean {
    const on = rc.immutableTags ?? this.d.cfg.global.immutableTags;
    const exclusions = rc.immutableTagsExclusions ?? this.d.cfg.global.immutableTagsExclusions;
    return on && !exclusions.some((re) => re.test(tag));
  }

  /**
   * A blob this namespace has no link for. Bytes another namespace already holds are linked
   * once the upstream confirms it has the digest under this name (never otherwise: that would
   * show this namespace content of another). "linked": read it locally now.
   */
  async blob(
    rc: RepositoryConfig,
    ns: string,
    digest: string,
    rangeHeader: string | null,
    withBody: boolean,
  ): Promise<PulledBlob | "linked"> {
    const up = this.set(rc);
    if (withBody) {
      const ahead = this.awaitingLayer.take(ns, digest);
      if (ahead) this.prefetcher.add(ns, ahead.filter((d) => d !== digest));
    }
    try {
      const fill = await this.runningFill(digest);
      if (fill && fill.ns === ns) {
        this.d.observe?.("blob", "follow");
        return await this.followFill(fill, rangeHeader, withBody);
      }
      const stored = await this.d.blobs.blob(digest);
      // A fill of this namespace may have settled (and linked) since the caller looked: read
      // it locally rather than asking the upstream to vouch for bytes this name already holds.
      // Only bytes stored here can be linked, so a blob new to this registry skips the read.
      if (stored && !fill && await this.d.blobs.link(ns, digest)) return "linked";
      if (stored || fill) {
        // The bytes are here or on their way: the upstream only has to vouch for this name.
        await up.headBlob(ns, digest);
        if (stored && await this.d.blobs.mount(ns, digest, NO_FACTS)) {
          this.d.observe?.("blob", "linked");
          return "linked";
        }
        if (fill) {
          fill.settled.then(() => this.d.blobs.mount(ns, digest, NO_FACTS)).catch(() => {});
          this.d.observe?.("blob", "follow");
          return await this.followFill(fill, rangeHeader, withBody);
        }
      }
      if (!withBody) {
        const head = await up.headBlob(ns, digest);
        return { size: head.size, range: resolveRange(rangeHeader, head.size) };
      }
      if (rangeHeader !== null && isPartial(rangeHeader)) {
        // Rule 8: a range over an uncached blob goes upstream as is; the blob is still queued.
        const part = await up.getBlob(ns, digest, rangeHeader);
        await this.queueFill(ns, digest, 0);
        this.d.observe?.("blob", "range");
        return {
          size: part.size ?? null,
          range: { kind: "full" },
          stream: part.body,
          upstream: { status: part.status, contentRange: part.contentRange ?? null },
        };
      }
      const f = await this.startFill(rc, up, ns, digest);
      // Should this process die mid-fill, the job fetches the blob again; once the fill is
      // done the job is dropped, and when it failed the job retries (or dead-letters) now.
      this.insure(f, ns, digest);
      this.d.observe?.("blob", "miss");
      return await this.followFill(f, rangeHeader, withBody);
    } catch (e) {
      this.d.observe?.("blob", "error");
      throw clientError(e, () =>
        new RegistryError(
          "BLOB_UNKNOWN",
          `${digest} not found upstream of ${truncate(ns)} (${upstreamMessage(e)})`,
        ));
    }
  }

  private async runningFill(digest: string): Promise<BlobFill | null> {
    const running = this.d.fills.get(digest);
    const fill = running ? await running.catch(() => null) : null;
    return fill && fill.state !== "failed" ? fill : null;
  }

  private startFill(
    rc: RepositoryConfig,
    up: UpstreamSet,
    ns: string,
    digest: string,
  ): Promise<BlobFill> {
    return this.d.fills.begin(ns, digest, async () => {
      const whole = await up.getBlob(ns, digest);
      if (whole.status !== 200) {
        await whole.body.cancel();
        throw new FillError(`upstream answered ${whole.status} to a whole-blob GET`, false);
      }
      try {
        await this.d.cacheCap?.beforeFill(rc, ns, digest, whole.size ?? null);
      } catch (e) {
        await whole.body.cancel();
        throw e;
      }
      return { body: whole.body, size: whole.size ?? null };
    });
  }

  private async followFill(
    fill: BlobFill,
    rangeHeader: string | null,
    withBody: boolean,
  ): Promise<PulledBlob> {
    const size = fill.size;
    const range = size === null ? { kind: "full" as const } : resolveRange(rangeHeader, size);
    if (!withBody || range.kind === "unsatisfiable") return { size, range };
    const stream = range.kind === "partial"
      ? await fill.follow(range.start, range.end)
      : await fill.follow();
    return { size, range, stream };
  }

  /**
   * Queues the `cache` job that stores `digest` in `ns` again from the upstream (a quarantined
   * copy: quarantine.ts), due now. Nothing for a namespace that is not a pull-through cache.
   */
  async refetch(ns: string, digest: string): Promise<void> {
    if (this.repository(ns)) await this.queueFill(ns, digest, 0);
  }

  /** The job's storage key, or null when it could not be queued. */
  private async queueFill(ns: string, digest: string, delayMs: number): Promise<string | null> {
    try {
      const r = await this.d.jobs.queue("cache").enqueue({
        kind: CACHE_FILL_KIND,
        payload: { namespace: ns, digest } satisfies FillPayload,
        lockKey: `${ns}@${digest}`,
        notBefore: Date.now() + delayMs,
      });
      return r.storageKey;
    } catch (e) {
      // The client's pull does not depend on the job; a failed enqueue only loses the retry.
      log.warn("could not queue a cache fill job", { namespace: ns, digest, error: String(e) });
      return null;
    }
  }

  /**
   * The `cache` job: makes sure `digest` is stored and linked in `namespace`. A fill already
   * running here is awaited rather than repeated. Retrying cannot fix wrong bytes, a refusal or
   * a vanished blob: those dead-letter at once.
   */
  async fillJob(job: JobContext): Promise<void> {
    const p = job.payload as Partial<FillPayload> | null;
    const ns = p?.namespace;
    const digest = p?.digest;
    if (typeof ns !== "string" || typeof digest !== "string" || !parseDigest(digest)) {
      throw new PermanentJobError("payload needs a namespace and a digest");
    }
    const rc = this.repository(ns);
    if (!rc) throw new PermanentJobError(`${ns} is not in a pull-through repository`);
    try {
      await this.ensureBlob(rc, ns, digest, job.signal, false);
    } catch (e) {
      if (e instanceof FillError && e.permanent) throw new PermanentJobError(e.message);
      if (isUpstreamError(e) && !e.retryable) throw new PermanentJobError(e.message);
      throw e;
    }
  }

  /**
   * `digest` stored and linked in `ns`: true when it had to be fetched. The `cache` job's work,
   * also done by a scheduled sync (lib/sync), which queues the same `cache` job as a client's
   * pull does (`insure`) in case this process dies mid-fill. Throws FillError/UpstreamError.
   */
  async ensureBlob(
    rc: RepositoryConfig,
    ns: string,
    digest: string,
    signal: AbortSignal,
    insure = true,
  ): Promise<boolean> {
    if (await this.d.blobs.link(ns, digest)) return false;
    let fill = await this.runningFill(digest);
    if (!fill) {
      const up = this.set(rc);
      if (await this.d.blobs.blob(digest)) {
        await up.headBlob(ns, digest);
        if (await this.d.blobs.mount(ns, digest, NO_FACTS)) return false;
      }
      fill = await this.startFill(rc, up, ns, digest);
      if (insure) this.insure(fill, ns, digest);
    }
    // The fill goes on without the job when the worker stops; the job is then taken over.
    await untilAborted(fill.settled, signal);
    if (fill.ns !== ns && !(await this.d.blobs.mount(ns, digest, NO_FACTS))) {
      throw new Error(`${digest} vanished before it could be linked to ${ns}`);
    }
    return true;
  }

  /**
   * Queues the `cache` job that redoes `fill` should this process die before it settles: once
   * the fill has run INSURE_AFTER_MS, or at once (due now) when it failed sooner, so it retries or
   * dead-letters. Most fills (small layers, configs) settle within a few upstream round trips,
   * and queueing then deleting their job was two KV commits and three reads each, half of a cold
   * blob's KV work (issue 25). A kill before INSURE_AFTER_MS loses only the background retry:
   * the client's pull failed with the process, and its retry fills afresh.
   */
  private insure(fill: BlobFill, ns: string, digest: string): void {
    const cache = this.d.jobs.queue("cache");
    const t = setTimeout(() => {
      timer = null;
      // Queued without holding up the fill or the response (a KV commit).
      this.queueFill(ns, digest, CACHE_FILL_DELAY_MS).then((job) => {
        if (job === null) return;
        return fill.settled.then(() => cache.deletePending(job), () => cache.expedite(job));
      }).catch(() => {});
    }, INSURE_AFTER_MS);
    Deno.unrefTimer(t as unknown as number);
    let timer: typeof t | null = t;
    const early = () => {
      if (timer === null) return false;
      clearTimeout(timer);
      timer = null;
      return true;
    };
    fill.settled.then(early, () => {
      if (early()) this.queueFill(ns, digest, 0).catch(() => {});
    });
  }

  /**
   * The upstream's signatures of `digest` (its cosign `.sig` tag, its signature referrers),
   * fetched and stored beside it (issue 34): what a verdict of a cached image is judged from.
   */
  fetchSignatures(rc: RepositoryConfig, ns: string, digest: string): Promise<number> {
    const signal = AbortSignal.timeout(120_000);
    return fetchSignatures(
      {
        manifests: this.d.manifests,
        sources: this.d.signatureSources,
        maxManifestSize: this.d.cfg.global.maxManifestSize,
        ensureBlob: (rc, ns, d) => this.ensureBlob(rc, ns, d, signal, false),
      },
      rc,
      this.set(rc),
      ns,
      digest,
    );
  }

  /** Referrers rule 5: the upstream's referrers of `subject`; an unreachable upstream is left out. */
  async referrers(
    rc: RepositoryConfig,
    ns: string,
    subject: string,
    artifactType: string | null,
  ): Promise<Descriptor[]> {
    try {
      const found = await this.set(rc).getReferrers(ns, subject, artifactType ?? undefined);
      return found.map((d) => {
        const out: Descriptor = { mediaType: d.mediaType, digest: d.digest, size: d.size };
        if (d.artifactType !== undefined) out.artifactType = d.artifactType;
        if (d.annotations !== undefined) out.annotations = d.annotations;
        return out;
      });
    } catch (e) {
      log.warn("upstream referrers left out", { namespace: ns, error: upstreamMessage(e) });
      return [];
    }
  }
}

function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

function isPartial(rangeHeader: string): boolean {
  return resolveRange(rangeHeader, Number.MAX_SAFE_INTEGER).kind !== "full";
}

function upstreamMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * An upstream failure as the client sees it: missing upstream → the caller's 404; down → 503
 * PROVIDER_UNAVAILABLE with Retry-After; an upstream's 416 to a forwarded range → 416; a
 * refusal or a bad answer (wrong digest, malformed) → 502 PROVIDER_UNAVAILABLE naming it.
 */
function clientError(e: unknown, notFound: () => RegistryError): unknown {
  if (e instanceof FillError) {
    return upstreamFailed(e.message);
  }
  if (!isUpstreamError(e)) return e;
  const u = e as UpstreamError;
  if (u.kind === "not-found") return notFound();
  if (u.status === 416) {
    return new RegistryError("SIZE_INVALID", `upstream: range not satisfiable (${u.message})`);
  }
  return u.down ? unavailable(u.message, u.retryAfterSecs ?? 5) : upstreamFailed(u.message);
}
