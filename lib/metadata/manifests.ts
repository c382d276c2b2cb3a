// Manifest revisions, tags and the indexes derived from them: reads here, writes (push and
// delete, planned within KV's limits) in manifest_writes.ts.
import type { WriteFacts } from "./write_facts.ts";
import { K, listAll, type ReferrerRecord, type RevisionRecord, type TagRecord } from "../kv/mod.ts";
import {
  commitManifest,
  deleteRevision,
  deleteTag,
  type ManifestWrite,
  type RevisionDelete,
} from "./manifest_writes.ts";

import type { UsageLedger } from "./usage.ts";

export type { Alongside, ManifestWrite, TagGuard } from "./manifest_writes.ts";

const TAG_CACHE_NAMESPACES = 1024;
const TAG_CACHE_MAX_TAGS = 50_000;

export class ManifestMeta {
  private readonly tagCache = new Map<string, { versionstamp: string; tags: string[] }>();
  /** `usage`: repository usage kept in the push and delete commits (readers may omit it) */
  constructor(private readonly kv: Deno.Kv, private readonly usage?: UsageLedger) {}

  async revision(ns: string, digest: string): Promise<RevisionRecord | null> {
    return (await this.kv.get<RevisionRecord>(K.rev(ns, digest))).value;
  }

  async tag(ns: string, tag: string): Promise<TagRecord | null> {
    return (await this.kv.get<TagRecord>(K.tag(ns, tag))).value;
  }

  /** A manifest push; `effects` hears its facts and adds their jobs to its commits. */
  commit(w: ManifestWrite, effects: WriteFacts): Promise<void> {
    return commitManifest(this.kv, w, effects, this.usage);
  }

  /** DELETE by tag: only that tag goes. `guard` sees the stored tag (LWW). */
  deleteTag(
    ns: string,
    tag: string,
    guard: (t: TagRecord) => void,
    effects: WriteFacts,
  ): Promise<void> {
    return deleteTag(this.kv, ns, tag, guard, effects);
  }

  /** Manifests of `ns` that reference blob `digest` (a config or layer), at most `limit`. */
  async manifestsUsing(ns: string, digest: string, limit = 100): Promise<string[]> {
    const out: string[] = [];
    for await (const e of this.kv.list({ prefix: K.brefs(ns, digest) }, { limit })) {
      out.push(e.key[3] as string);
    }
    return out;
  }

  /** Tags pointing at a revision. */
  async tagsOf(ns: string, digest: string): Promise<string[]> {
    return (await listAll(this.kv, { prefix: K.tagrevs(ns, digest) })).map((e) =>
      e.key[3] as string
    );
  }

  /** DELETE by digest: the revision, its tags and its references (manifest_writes.ts). */
  deleteRevision(d: Omit<RevisionDelete, "usage">): Promise<void> {
    return deleteRevision(this.kv, { ...d, usage: this.usage });
  }

  /**
   * A page of tag names after `last`. The full list is cached per namespace and served while
   * the namespace's tagver versionstamp is unchanged: one KV get instead of a listing, and
   * still exact across processes because every tag change rewrites tagver in its commit.
   */
  async listTags(
    ns: string,
    n: number | null,
    last: string | null,
  ): Promise<{ tags: string[]; more: boolean }> {
    if (n === 0) return { tags: [], more: false };
    const all = await this.allTags(ns);
    let from = 0;
    if (last !== null) {
      let lo = 0;
      let hi = all.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (all[mid] <= last) lo = mid + 1;
        else hi = mid;
      }
      from = lo;
    }
    if (n === null) return { tags: all.slice(from), more: false };
    return { tags: all.slice(from, from + n), more: from + n < all.length };
  }

  private async allTags(ns: string): Promise<string[]> {
    const ver = (await this.kv.get(K.tagver(ns))).versionstamp;
    const hit = this.tagCache.get(ns);
    if (ver !== null && hit?.versionstamp === ver) return hit.tags;
    const tags: string[] = [];
    for await (const e of this.kv.list({ prefix: K.tags(ns) }, { batchSize: 1000 })) {
      tags.push(e.key[2] as string);
    }
    // KV orders string keys by their UTF-8 bytes; tags are ASCII, so this is also code-unit order.
    if (ver !== null && tags.length <= TAG_CACHE_MAX_TAGS) {
      if (this.tagCache.size >= TAG_CACHE_NAMESPACES) {
        this.tagCache.delete(this.tagCache.keys().next().value!);
      }
      this.tagCache.set(ns, { versionstamp: ver, tags });
    }
    return tags;
  }

  /** Every revision of `ns` with its record, streamed (reindex walks them). */
  async *revisions(ns: string): AsyncGenerator<{ digest: string; rec: RevisionRecord }> {
    for await (
      const e of this.kv.list<RevisionRecord>({ prefix: K.revs(ns) }, { batchSize: 500 })
    ) {
      yield { digest: e.key[2] as string, rec: e.value };
    }
  }

  async hasRevisions(ns: string): Promise<boolean> {
    for await (const _ of this.kv.list({ prefix: K.revs(ns) }, { limit: 1 })) return true;
    return false;
  }

  async referrers(ns: string, subject: string): Promise<{ digest: string; rec: ReferrerRecord }[]> {
    return (await listAll<ReferrerRecord>(this.kv, { prefix: K.referrers(ns, subject) }))
      .map((e) => ({ digest: e.key[3] as string, rec: e.value }));
  }

  /**
   * Catalog walk: namespaces from the category index that hold content, after `last`, until `n`
   * admitted ones are found (`admit` is the policy filter).
   */
  async catalog(
    n: number,
    last: string | null,
    admit: (ns: string) => boolean | Promise<boolean>,
  ): Promise<{ names: string[]; more: boolean }> {
    const selector: Deno.KvListSelector = last === null
      ? { prefix: K.nsAll() }
      : { prefix: K.nsAll(), start: [...K.nsAll(), last + "\0"] };
    const names: string[] = [];
    if (n === 0) return { names, more: false };
    for await (const e of this.kv.list(selector, { batchSize: 200 })) {
      const ns = e.key[1] as string;
      if (!(await this.hasRevisions(ns)) || !(await admit(ns))) continue;
      if (names.length === n) return { names, more: true };
      names.push(ns);
    }
    return { names, more: false };
  }
}
