// Manifest revisions, tags and the indexes derived from them. A push or delete is one atomic
// commit guarded by versionstamps on every tag it reads, so concurrent writers never interleave.
import { RegistryError } from "../oci/errors.ts";
import type { ParsedManifest } from "../oci/manifest.ts";
import { K, type ReferrerRecord, type RevisionRecord, type TagRecord } from "./keys.ts";
import { getAll, listAll, MAX_MUTATIONS, setInBatches } from "./kv_util.ts";
import { checkNotReclaiming } from "./reclaim.ts";
import {
  type BytesPlaced,
  type OwnedLinks,
  reservationAfterConflict,
  RESERVED_WRITE_ATTEMPTS,
} from "./blobs.ts";

export interface TagGuard {
  /** throws to refuse moving/creating `tag` given what is stored now */
  (tag: string, existing: TagRecord | null): void;
}

export interface ManifestWrite {
  ns: string;
  digest: string;
  record: RevisionRecord;
  parsed: ParsedManifest;
  tags: string[];
  tagCreatedAt: number;
  guard: TagGuard;
  /** the blob reservation of an out-of-line body (BlobMeta.reserve), null when inline */
  reserved: string | null;
  /** whether the out-of-line body is still in the blob store (see reservationAfterConflict) */
  placed: BytesPlaced;
  /**
   * With allow_missing_manifest_references = false: reads (and requires) the namespace's links
   * of every referenced blob, afresh on each attempt (BlobMeta.ownedLinks).
   */
  owned?: () => Promise<OwnedLinks>;
}

const REFERRER_ANNOTATIONS_MAX = 16 * 1024;

function referrerRecord(w: ManifestWrite): ReferrerRecord {
  const rec: ReferrerRecord = { mediaType: w.record.mediaType, size: w.record.size };
  if (w.parsed.artifactType) rec.artifactType = w.parsed.artifactType;
  const ann = w.parsed.annotations;
  if (ann && JSON.stringify(ann).length <= REFERRER_ANNOTATIONS_MAX) rec.annotations = ann;
  return rec;
}

const TAG_CACHE_NAMESPACES = 1024;
const TAG_CACHE_MAX_TAGS = 50_000;

export class ManifestMeta {
  private readonly tagCache = new Map<string, { versionstamp: string; tags: string[] }>();
  constructor(private readonly kv: Deno.Kv) {}

  async revision(ns: string, digest: string): Promise<RevisionRecord | null> {
    return (await this.kv.get<RevisionRecord>(K.rev(ns, digest))).value;
  }

  async tag(ns: string, tag: string): Promise<TagRecord | null> {
    return (await this.kv.get<TagRecord>(K.tag(ns, tag))).value;
  }

  async commit(w: ManifestWrite): Promise<void> {
    const { ns, digest } = w;
    const refs: [Deno.KvKey, unknown][] = [
      ...w.parsed.blobs.map((b): [Deno.KvKey, unknown] => [K.bref(ns, b, digest), true]),
      ...w.parsed.children.map((
        c,
      ): [Deno.KvKey, unknown] => [K.mref(ns, c.digest, digest), c.platform ?? null]),
    ];
    // A huge index would exceed KV's per-commit mutation limit. Its references are written
    // first: a reference without its revision only makes blob deletes refuse and scrub keep
    // bytes, never the reverse, and a retry of the push completes it.
    const linkWrites = w.owned ? w.parsed.blobs.length : 0;
    const split = refs.length + 2 * w.tags.length + 4 + linkWrites > MAX_MUTATIONS;
    if (split) await setInBatches(this.kv, refs);
    let reserved = w.reserved;
    for (let attempt = 0; attempt < RESERVED_WRITE_ATTEMPTS; attempt++) {
      const [rev, ...tagEntries] = await getAll<unknown>(this.kv, [
        K.rev(ns, digest),
        ...w.tags.map((t) => K.tag(ns, t)),
      ]);
      const owned = w.owned ? await w.owned() : null;
      const op = this.kv.atomic().check(rev);
      for (let i = 0; i < w.tags.length; i++) {
        const e = tagEntries[i] as Deno.KvEntryMaybe<TagRecord>;
        w.guard(w.tags[i], e.value);
        op.check(e);
        if (e.value && e.value.digest !== digest) {
          op.delete(K.tagrev(ns, e.value.digest, w.tags[i]));
        }
        op.set(K.tag(ns, w.tags[i]), { digest, createdAt: w.tagCreatedAt } satisfies TagRecord);
        op.set(K.tagrev(ns, digest, w.tags[i]), true);
      }
      if (w.tags.length > 0) op.set(K.tagver(ns), true);
      const outOfLine = !rev.value && reserved !== null;
      if (!rev.value) {
        op.set(K.rev(ns, digest), w.record);
        if (outOfLine) {
          // The body was just written to the blob store: keep scrub from reclaiming it.
          op.check({ key: K.blob(digest), versionstamp: reserved });
          op.set(K.body(digest, ns), true);
          checkNotReclaiming(op, digest);
        }
        if (!split) { for (const [k, v] of refs) op.set(k, v); }
        if (owned && !split) {
          // A blob delete in ns since `owned` was read fails this commit (unlinkver); rewriting
          // each link fails a blob delete that read it before this commit. (A manifest too big
          // for one commit goes without this guard.)
          op.check(owned.version);
          for (const l of owned.links) op.set(l.key, l.value);
        }
        if (w.parsed.subject) op.set(K.referrer(ns, w.parsed.subject, digest), referrerRecord(w));
      }
      op.set(K.ns(ns), { at: Date.now() });
      if ((await op.commit()).ok) return;
      if (outOfLine) reserved = await reservationAfterConflict(this.kv, digest, w.placed);
    }
    throw new RegistryError("INTERNAL_ERROR", "manifest commit kept conflicting", { status: 503 });
  }

  /** DELETE by tag: only that tag goes. `guard` sees the stored tag (LWW). */
  async deleteTag(ns: string, tag: string, guard: (t: TagRecord) => void): Promise<void> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const e = await this.kv.get<TagRecord>(K.tag(ns, tag));
      if (!e.value) throw new RegistryError("MANIFEST_UNKNOWN", `tag ${tag}`);
      guard(e.value);
      // tagver is rewritten in the same commit, so listTags' cached list is dropped with it.
      const r = await this.kv.atomic().check(e).delete(K.tag(ns, tag)).delete(
        K.tagrev(ns, e.value.digest, tag),
      ).set(K.tagver(ns), true).commit();
      if (r.ok) return;
    }
    throw new RegistryError("INTERNAL_ERROR", "tag delete kept conflicting", { status: 503 });
  }

  /** Tags pointing at a revision. */
  async tagsOf(ns: string, digest: string): Promise<string[]> {
    return (await listAll(this.kv, { prefix: K.tagrevs(ns, digest) })).map((e) =>
      e.key[3] as string
    );
  }

  /**
   * DELETE by digest: the revision, every tag pointing at it and the indexes derived from its
   * body (`parsed`), in one commit. `guard` sees each tag (LWW rule 3: any newer tag refuses all).
   */
  async deleteRevision(
    ns: string,
    digest: string,
    parsed: ParsedManifest,
    guard: (t: TagRecord) => void,
  ): Promise<void> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const rev = await this.kv.get<RevisionRecord>(K.rev(ns, digest));
      if (!rev.value) throw new RegistryError("MANIFEST_UNKNOWN", digest);
      const tags = await this.tagsOf(ns, digest);
      const tagEntries = await getAll<TagRecord>(this.kv, tags.map((t) => K.tag(ns, t)));
      const keys: Deno.KvKey[] = [K.rev(ns, digest)];
      if (rev.value.body === undefined) keys.push(K.body(digest, ns));
      const op = this.kv.atomic().check(rev);
      tagEntries.forEach((e, i) => {
        op.check(e);
        keys.push(K.tagrev(ns, digest, tags[i]));
        if (e.value?.digest === digest) {
          guard(e.value);
          keys.push(K.tag(ns, tags[i]));
        }
      });
      if (tags.length > 0) op.set(K.tagver(ns), true);
      for (const b of parsed.blobs) keys.push(K.bref(ns, b, digest));
      for (const c of parsed.children) keys.push(K.mref(ns, c.digest, digest));
      if (parsed.subject) keys.push(K.referrer(ns, parsed.subject, digest));
      if (keys.length + tagEntries.length > MAX_MUTATIONS) {
        // Too big for one commit: drop the revision and tags atomically first (what clients
        // see), then the derived indexes; a leftover reference is conservative (see commit).
        const head = keys.slice(0, (rev.value.body === undefined ? 2 : 1) + 2 * tags.length);
        for (const k of head) op.delete(k);
        if (!(await op.commit()).ok) continue;
        for (let i = head.length; i < keys.length; i += 500) {
          const batch = this.kv.atomic();
          for (const k of keys.slice(i, i + 500)) batch.delete(k);
          await batch.commit();
        }
        return;
      }
      for (const k of keys) op.delete(k);
      if ((await op.commit()).ok) return;
    }
    throw new RegistryError("INTERNAL_ERROR", "manifest delete kept conflicting", { status: 503 });
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
