// Reads for a size-capped pull-through cache (issue 26, part 2): the revisions of a repository's
// namespaces with when each was fetched and last pulled, and the pull stamp the cache keeps
// itself (a blind atomic max, as pull history's) whether or not pull history is on. The stamp is
// also the lease that keeps an image in use by any process on the KV from being evicted.
import { K, type RevisionRecord } from "../kv/mod.ts";

/** Stamps to a commit: far under the 1,000 mutations and 800 KiB a commit may hold. */
const TOUCH_BATCH = 100;
/** References read per renewal: bounds a renewal's cost whatever the namespace holds. */
const IMAGES_READ = 50;

export interface CachedRevision {
  ns: string;
  digest: string;
  size: number;
  fetchedAt: number;
  lastPulled: number | null;
}

export class CacheMeta {
  constructor(private readonly kv: Deno.Kv) {}

  /** Namespaces indexed under `repository` (itself and `repository/…`), `belongs` filtering. */
  async namespaces(repository: string, belongs: (ns: string) => boolean): Promise<string[]> {
    const out: string[] = [];
    // "/" sorts before "0": this range holds `repository` and every `repository/…`.
    const it = this.kv.list({ start: K.ns(repository), end: K.ns(repository + "0") });
    for await (const e of it) {
      const ns = e.key[1] as string;
      if ((ns === repository || ns.startsWith(repository + "/")) && belongs(ns)) out.push(ns);
    }
    return out;
  }

  async revisions(namespaces: string[]): Promise<CachedRevision[]> {
    const out: CachedRevision[] = [];
    for (const ns of namespaces) {
      const pulled = new Map<string, number>();
      for await (const e of this.kv.list<Deno.KvU64>({ prefix: K.lastPullsIn(ns) })) {
        pulled.set(e.key[2] as string, Number(e.value.value));
      }
      for await (const e of this.kv.list<RevisionRecord>({ prefix: K.revs(ns) })) {
        const digest = e.key[2] as string;
        out.push({
          ns,
          digest,
          size: e.value.size,
          fetchedAt: e.value.pushedAt,
          lastPulled: pulled.get(digest) ?? null,
        });
      }
    }
    return out;
  }

  /** Records a pull of a cached revision now (newest wins). */
  async touch(ns: string, digest: string): Promise<void> {
    await this.kv.atomic().max(K.lastPull(ns, digest), BigInt(Date.now()))
      .commit();
  }

  /** Stamps every one of `digests` of `ns` now: blind maxes, TOUCH_BATCH to a commit. */
  async touchAll(ns: string, digests: string[]): Promise<void> {
    const now = BigInt(Date.now());
    for (let i = 0; i < digests.length; i += TOUCH_BATCH) {
      const op = this.kv.atomic();
      for (const d of digests.slice(i, i + TOUCH_BATCH)) op.max(K.lastPull(ns, d), now);
      await op.commit();
    }
  }

  /** The newest pull stamp of a cached revision (ms), null when none was recorded. */
  async stamp(ns: string, digest: string): Promise<number | null> {
    return stampOf(await this.stampEntry(ns, digest));
  }

  /** The stamp's entry, for a commit that must not land after a pull (an eviction). */
  stampEntry(ns: string, digest: string): Promise<Deno.KvEntryMaybe<Deno.KvU64>> {
    return this.kv.get<Deno.KvU64>(K.lastPull(ns, digest));
  }

  /**
   * The images of `ns` blob `digest` belongs to: the manifests referencing it and the indexes
   * referencing those, at most `limit` of them (a layer shared by hundreds of images renews the
   * first ones; the rest keep their own stamps).
   */
  async imagesOf(ns: string, digest: string, limit = IMAGES_READ): Promise<string[]> {
    const out = new Set<string>();
    for await (const e of this.kv.list({ prefix: K.brefs(ns, digest) }, { limit })) {
      out.add(e.key[3] as string);
    }
    for (const m of [...out]) {
      if (out.size >= limit) break;
      const it = this.kv.list({ prefix: K.mrefs(ns, m) }, { limit: limit - out.size });
      for await (const e of it) out.add(e.key[3] as string);
    }
    return [...out];
  }

  /** Whether a manifest of `ns` still references blob `digest`. */
  async referenced(ns: string, digest: string): Promise<boolean> {
    for await (const _ of this.kv.list({ prefix: K.brefs(ns, digest) }, { limit: 1 })) return true;
    return false;
  }
}

/** A stamp entry's time (ms), null when none was recorded. */
export function stampOf(e: Deno.KvEntryMaybe<Deno.KvU64>): number | null {
  return e.value === null ? null : Number(e.value.value);
}
