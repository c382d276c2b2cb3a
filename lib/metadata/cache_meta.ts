// Reads for a size-capped pull-through cache (issue 26, part 2): the revisions of a repository's
// namespaces with when each was fetched and last pulled, and the pull stamp the cache keeps
// itself (a blind atomic max, as pull history's) whether or not pull history is on.
import { K, type RevisionRecord } from "./keys.ts";

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

  /** Whether a manifest of `ns` still references blob `digest`. */
  async referenced(ns: string, digest: string): Promise<boolean> {
    for await (const _ of this.kv.list({ prefix: K.brefs(ns, digest) }, { limit: 1 })) return true;
    return false;
  }
}
