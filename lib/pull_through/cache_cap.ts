// `max_cache_bytes` on a pull-through repository (issue 26, part 2): before a fill that would
// take the repository's usage past the cap, its least recently pulled images are evicted (their
// tags and revision deleted, their blobs no other manifest of the namespace references unlinked,
// so the next scrub reclaims the bytes) until the fill fits. An image is in use, and never chosen,
// while its pull stamp (or its fetch) is younger than the hold: every manifest pull stamps it, and
// a blob stream (a serve or a fill) renews the stamps of its images every third of the hold while
// it lasts, so a process on the same KV sees what another is serving; images this process holds
// are skipped as well. An evicted image is fetched again on its next pull.
import { type Config, type RepositoryConfig, repositoryOf } from "../config/mod.ts";
import { parseManifest, RegistryError } from "../oci/mod.ts";
import {
  type BlobMeta,
  type CacheMeta,
  NO_FACTS,
  stampOf,
  type UsageLedger,
} from "../metadata/mod.ts";
import { keepRenewed } from "../kv/mod.ts";
import { evictionOrder } from "./eviction.ts";
import { log } from "../log.ts";
import type { CacheManifests } from "./ports.ts";

/**
 * How long a pull stamp keeps its image in use. A minute spans the gap between a client's
 * manifest GET and its first blob GETs with room for a busy machine and clocks a few seconds
 * apart, while a stream renewing every 20 s costs one list and one write per 20 s; a process
 * that dies mid-stream leaves its images protected at most this long.
 */
export const CACHE_HOLD_MS = 60_000;

export interface CacheCapDeps {
  cfg: () => Config;
  usage: UsageLedger;
  meta: CacheMeta;
  manifests: CacheManifests;
  blobs: BlobMeta;
  /** metrics: images evicted from a repository */
  observe?: (repository: string, images: number) => void;
  /** how long a pull stamp keeps its image in use; default CACHE_HOLD_MS (tests shorten it) */
  holdMs?: number;
}

export class CacheCap {
  /** `ns\0digest` → how many requests hold it */
  private readonly held = new Map<string, number>();
  /** one eviction pass per repository at a time in this process */
  private readonly passes = new Map<string, Promise<unknown>>();
  private readonly holdMs: number;
  constructor(private readonly d: CacheCapDeps) {
    this.holdMs = d.holdMs ?? CACHE_HOLD_MS;
  }

  /** Runs `fn` with the image `digest` of `ns` held (not evictable by this process). */
  async hold<T>(ns: string, digest: string, fn: () => Promise<T>): Promise<T> {
    const k = `${ns}\0${digest}`;
    this.held.set(k, (this.held.get(k) ?? 0) + 1);
    try {
      return await fn();
    } finally {
      const n = this.held.get(k)! - 1;
      if (n > 0) this.held.set(k, n);
      else this.held.delete(k);
    }
  }

  /**
   * `read` of blob `digest` from `ns`, renewing the pull stamps of the images the blob belongs to
   * every third of the hold while it is being sent (a slow client, a slow fill), so no process
   * evicts them meanwhile. A stream shorter than that costs no KV operation. With the server's
   * completion signal (`sent`) the stream is handed on untouched, so the file store's native pipe
   * stays (a JS wrapper measured 40–51% slower for 8 concurrent 128 MiB GETs); without it, a
   * pass-through stream tells when it ends.
   */
  serving<R extends { stream?: ReadableStream<Uint8Array> }>(
    rc: RepositoryConfig,
    ns: string,
    digest: string,
    read: R,
    sent: Promise<void> | null = null,
  ): R {
    const body = read.stream;
    if (rc.maxCacheBytes === undefined || !body) return read;
    // A hold is never lost (a stamp is anyone's to refresh): the renewal loop only keeps time.
    const renewal = keepRenewed(
      async () => {
        await this.d.meta.touchAll(ns, await this.d.meta.imagesOf(ns, digest));
        return true;
      },
      this.holdMs / 3,
      {
        unref: true,
        onError: (e) =>
          log.warn("cache hold not renewed", { namespace: ns, digest, error: String(e) }),
      },
    );
    const stop = () => void renewal.stop();
    if (sent) {
      sent.then(stop, stop);
      return read;
    }
    const reader = body.getReader();
    const stream = new ReadableStream<Uint8Array>({
      async pull(c) {
        try {
          const r = await reader.read();
          if (r.done) {
            stop();
            c.close();
          } else c.enqueue(r.value);
        } catch (e) {
          stop();
          c.error(e);
        }
      },
      cancel(reason) {
        stop();
        return reader.cancel(reason);
      },
    }, { highWaterMark: 0 });
    return { ...read, stream };
  }

  /** Records a pull of a capped repository's image (its eviction order). Never fails a pull. */
  touched(rc: RepositoryConfig, ns: string, digest: string): void {
    if (rc.maxCacheBytes === undefined) return;
    this.d.meta.touch(ns, digest).catch((e) =>
      log.warn("cache pull time not recorded", { namespace: ns, error: String(e) })
    );
  }

  /**
   * Before filling blob `digest` (`size` bytes, null when the upstream did not say) into `ns`:
   * evicts to make room under a cap; under a quota refuses (403 DENIED) a fill the link commit
   * would refuse anyway, before any byte is fetched.
   */
  async beforeFill(
    rc: RepositoryConfig,
    ns: string,
    digest: string,
    size: number | null,
  ): Promise<void> {
    if (size === null) return;
    if (rc.maxCacheBytes !== undefined) return void await this.makeRoom(rc, ns, size);
    if (!this.d.usage.limited(ns)) return; // no quota: nothing to refuse, so nothing to read
    await this.d.usage.planAdd(ns, digest, size); // throws past a quota; commits nothing
  }

  /**
   * Makes room for `needed` more bytes in `rc` (a capped pull-through repository), `keep`
   * naming images of `ns` the fill belongs to. Returns how many images were evicted.
   */
  makeRoom(rc: RepositoryConfig, ns: string, needed: number, keep: string[] = []): Promise<number> {
    const cap = rc.maxCacheBytes;
    if (cap === undefined) return Promise.resolve(0);
    const before = this.passes.get(rc.name) ?? Promise.resolve();
    const pass = before.catch(() => {}).then(() => this.evictUntil(rc, ns, cap, needed, keep));
    this.passes.set(rc.name, pass);
    pass.finally(() => {
      if (this.passes.get(rc.name) === pass) this.passes.delete(rc.name);
    }).catch(() => {});
    return pass;
  }

  private async evictUntil(
    rc: RepositoryConfig,
    ns: string,
    cap: number,
    needed: number,
    keep: string[],
  ): Promise<number> {
    let used = await this.d.usage.used(rc.name);
    if (used + needed <= cap) return 0;
    const cfg = this.d.cfg();
    const namespaces = await this.d.meta.namespaces(
      rc.name,
      (n) => repositoryOf(cfg, n).name === rc.name,
    );
    const protect = new Set([...this.held.keys(), ...keep.map((d) => `${ns}\0${d}`)]);
    let n = 0;
    const revisions = await this.d.meta.revisions(namespaces);
    for (const victim of evictionOrder(revisions, protect, Date.now() - this.holdMs)) {
      if (used + needed <= cap) break;
      if (this.held.has(`${victim.ns}\0${victim.digest}`)) continue;
      if (await this.evict(victim.ns, victim.digest)) n++;
      used = await this.d.usage.used(rc.name);
    }
    if (n > 0) {
      this.d.observe?.(rc.name, n);
      log.info("evicted cached images to stay under max_cache_bytes", {
        repository: rc.name,
        images: n,
        used_bytes: used,
        max_cache_bytes: cap,
      });
    }
    return n;
  }

  /** Deletes one cached image and unlinks the blobs nothing else in its namespace references. */
  private async evict(ns: string, digest: string): Promise<boolean> {
    let blobs: string[];
    try {
      const { rev } = await this.d.manifests.resolve(ns, digest);
      blobs = parseManifest(await this.d.manifests.body(digest, rev), rev.mediaType).blobs;
      // A pull since the judgment (any process) wins: every commit of the delete checks the
      // stamp it read just before, and a stamp within the hold calls the eviction off.
      await this.d.manifests.delete(ns, digest, null, {
        unlessChanged: async () => {
          const e = await this.d.meta.stampEntry(ns, digest);
          const at = stampOf(e);
          if (at !== null && at >= Date.now() - this.holdMs) {
            throw new RegistryError("DENIED", "the image is in use: not evicted");
          }
          return e;
        },
      });
    } catch (e) {
      // Gone already (another process evicted it) or unreadable: the next candidate serves.
      if (e instanceof RegistryError) return false;
      throw e;
    }
    for (const b of blobs) {
      if (await this.d.meta.referenced(ns, b)) continue;
      try {
        await this.d.blobs.unlink(ns, b, NO_FACTS);
      } catch (e) {
        // Referenced again since (a fill of another image) or already unlinked: it stays.
        if (!(e instanceof RegistryError)) throw e;
      }
    }
    return true;
  }
}
