// Blobs of a pull-through namespace (SPEC §Blobs rule 8): a blob is filled once (blob_fill.ts)
// while every client follows the fill; bytes stored for another namespace are linked once the
// upstream vouches for them here; a range over an uncached blob is forwarded upstream and the
// blob queued for a `cache` job, which also insures a fill against this process dying; the
// first layer GET of a fetched manifest fills its other small blobs ahead (prefetch.ts).
import {
  parseDigest,
  type ParsedManifest,
  RegistryError,
  resolveRange,
  truncate,
} from "../oci/mod.ts";
import { type RepositoryConfig } from "../config/mod.ts";
import { NO_FACTS } from "../metadata/mod.ts";
import { type JobContext, PermanentJobError } from "../jobs/mod.ts";
import { isUpstreamError, type UpstreamSet, verifyDigest } from "../upstream/mod.ts";
import { log } from "../log.ts";
import { type BlobFill, FillError } from "./blob_fill.ts";
import { AwaitingLayer, Prefetcher, type PrefetchItem } from "./prefetch.ts";
import type { PulledBlob } from "./ports.ts";
import {
  clientError,
  type PullThroughDeps,
  type PullUpstreams,
  upstreamMessage,
} from "./pull_upstreams.ts";

/** The `cache` job that completes (or redoes) the fill of one blob into one namespace. */
export const CACHE_FILL_KIND = "fill-blob";

/**
 * A cache job waits this long before it runs: the fill a client started usually finishes
 * first (the job then only sees the blob linked); it matters when that process died mid-fill.
 */
export const CACHE_FILL_DELAY_MS = 30_000;

/** A fill still running after this long gets its `cache` job (see `insure`). */
export const INSURE_AFTER_MS = 250;

interface FillPayload {
  namespace: string;
  digest: string;
}

/** Blob reads, fills, their `cache` jobs and prefetch. */
export class PullBlobs {
  private readonly prefetcher = new Prefetcher((item, signal) => this.prefetchOne(item, signal));
  private readonly awaitingLayer = new AwaitingLayer();

  constructor(
    private readonly d: PullThroughDeps,
    private readonly upstreams: PullUpstreams,
  ) {}

  close(): void {
    this.prefetcher.close();
  }

  /**
   * Remembers the small blobs of a manifest just fetched: the first GET of one of its layers
   * queues them all (prefetch.ts). Not the manifest fetch itself: `skopeo inspect` and a sync's
   * completeness check read a manifest (and a config) without wanting its layers.
   */
  awaitLayerGet(rc: RepositoryConfig, ns: string, parsed: ParsedManifest): void {
    const max = rc.prefetchMaxBytes ?? 0;
    if (max <= 0 || !parsed.blobSizes) return;
    const small = parsed.blobs.filter((d) => (parsed.blobSizes!.get(d) ?? Infinity) <= max);
    if (small.length === 0) return;
    this.awaitingLayer.add(ns, parsed.layers.map((l) => l.digest), small);
  }

  /** One queued prefetch: what a `cache` job does, without the job (prefetch.ts). */
  private async prefetchOne(item: PrefetchItem, signal: AbortSignal): Promise<void> {
    const rc = this.upstreams.repository(item.ns);
    if (!rc || (rc.prefetchMaxBytes ?? 0) <= 0) return;
    // A store that takes no new bytes would refuse the fill: the client's GET passes it through.
    if (await this.d.blobRefusal?.()) return;
    if (await this.ensureBlob(rc, item.ns, item.digest, signal, false)) {
      this.d.observe?.("blob", "prefetch");
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
    const up = this.upstreams.set(rc);
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
      // The blob store takes no new bytes (below its reserve, full, failing): the client still
      // gets the blob, verified and uncached, rather than a fill that would be refused.
      if (await this.d.blobRefusal?.()) return await this.passThrough(up, ns, digest);
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

  /**
   * A miss served straight from the upstream, its bytes checked as they pass (the last chunk
   * held back until they hashed to `digest`) and not stored: no fill, no `cache` job; the next
   * pull fills it once the store takes bytes again.
   */
  private async passThrough(
    up: UpstreamSet,
    ns: string,
    digest: string,
  ): Promise<PulledBlob> {
    const whole = await this.wholeBlob(up, ns, digest);
    const max = this.d.cfg.global.maxBlobSize;
    if (whole.size != null && max !== null && whole.size > max) {
      await whole.body.cancel();
      throw new FillError(`upstream blob of ${whole.size} bytes exceeds max_blob_size`, true);
    }
    this.d.observe?.("blob", "uncached");
    const limit = whole.size ?? max ?? Number.MAX_SAFE_INTEGER;
    return {
      size: whole.size ?? null,
      range: { kind: "full" },
      stream: verifyDigest(whole.body, digest, up.repository, limit),
    };
  }

  /** The upstream's whole blob: a 200, else a (retryable) FillError naming what it answered. */
  private async wholeBlob(up: UpstreamSet, ns: string, digest: string) {
    const whole = await up.getBlob(ns, digest);
    if (whole.status !== 200) {
      await whole.body.cancel();
      throw new FillError(`upstream answered ${whole.status} to a whole-blob GET`, false);
    }
    return whole;
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
      const whole = await this.wholeBlob(up, ns, digest);
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
    if (this.upstreams.repository(ns)) await this.queueFill(ns, digest, 0);
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
    const rc = this.upstreams.repository(ns);
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
      const up = this.upstreams.set(rc);
      if (await this.d.blobs.blob(digest)) {
        await up.headBlob(ns, digest);
        if (await this.d.blobs.mount(ns, digest, NO_FACTS)) return false;
      }
      // A store that takes no new bytes would refuse the fill: no download for nothing, the job
      // retries with its backoff (a client's pull passes through meanwhile).
      const refusal = await this.d.blobRefusal?.();
      if (refusal) throw new FillError(`the blob store takes no new bytes: ${refusal}`, false);
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
