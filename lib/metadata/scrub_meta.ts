// The KV side of scrub: full scans of the reference keys, derived-key repairs, idle upload
// sessions, emptied namespaces and the one-scrub-at-a-time lease. Every change is a commit
// guarded by the versionstamp scrub read, so a concurrent writer always wins.
import {
  type BlobRecord,
  hasAny,
  K,
  type Lease,
  type LeaseFormat,
  Leases,
  type UploadRecord,
} from "../kv/mod.ts";

/** A scrub renews its lease every third of LEASE_MS; one that died frees it within LEASE_MS. */
export const LEASE_MS = 2 * 60_000;

/** The scrub lease as stored: when it was last renewed, and by whom. */
export interface ScrubLease {
  at: number;
  holder: string;
}

const SCRUB_LEASE: LeaseFormat<ScrubLease> = {
  write: (holder, now) => ({ at: now, holder }),
  read: (v) => ({ holder: v.holder, until: v.at + LEASE_MS }),
};
const BATCH = 1000;

export interface References {
  /** digests some namespace owns (link keys) */
  linked: Set<string>;
  /** digests a revision keeps its manifest body under */
  bodies: Set<string>;
  /** every manifest digest some namespace holds a revision of (inline bodies included) */
  manifests: Set<string>;
  /** derived keys fixed (or that would be, in a dry run) */
  repaired: number;
  scanned: number;
}

export class ScrubMeta {
  private readonly leases: Leases<ScrubLease>;
  constructor(private readonly kv: Deno.Kv) {
    this.leases = new Leases(kv, SCRUB_LEASE);
  }

  /** Takes the one-scrub-at-a-time lease; null when another live scrub holds it. */
  async lease(holder: string): Promise<Lease<ScrubLease> | null> {
    const r = await this.leases.take(K.scrubLock(), holder, LEASE_MS);
    return r.ok ? r.lease : null;
  }

  /**
   * Walks link/owner and rev/body, repairing the reverse keys that can be derived: an owner
   * key per link, a body key per out-of-line revision, neither without its source.
   */
  async references(dryRun: boolean): Promise<References> {
    const out: References = {
      linked: new Set(),
      bodies: new Set(),
      manifests: new Set(),
      repaired: 0,
      scanned: 0,
    };
    const links = new Set<string>();
    for await (const e of this.list(K.linksAll())) {
      out.scanned++;
      const [, ns, digest] = e.key as [string, string, string];
      out.linked.add(digest);
      links.add(`${digest}\0${ns}`);
    }
    const owners = new Set<string>();
    for await (const e of this.list(K.ownersAll())) {
      out.scanned++;
      const [, digest, ns] = e.key as [string, string, string];
      owners.add(`${digest}\0${ns}`);
      if (links.has(`${digest}\0${ns}`)) continue;
      out.repaired++;
      if (!dryRun) {
        await this.kv.atomic().check(e).check({ key: K.link(ns, digest), versionstamp: null })
          .delete(e.key).commit();
      }
    }
    for (const pair of links) {
      if (owners.has(pair)) continue;
      const [digest, ns] = pair.split("\0");
      const link = await this.kv.get(K.link(ns, digest));
      if (!link.value) continue;
      out.repaired++;
      if (!dryRun) await this.kv.atomic().check(link).set(K.owner(digest, ns), true).commit();
    }

    const revBodies = new Set<string>();
    for await (const e of this.list<{ body?: Uint8Array }>(K.revsAll())) {
      out.scanned++;
      const [, ns, digest] = e.key as [string, string, string];
      out.manifests.add(digest);
      if (e.value.body !== undefined) continue;
      out.bodies.add(digest);
      revBodies.add(`${digest}\0${ns}`);
    }
    const bodyKeys = new Set<string>();
    for await (const e of this.list(K.bodiesAll())) {
      out.scanned++;
      const [, digest, ns] = e.key as [string, string, string];
      bodyKeys.add(`${digest}\0${ns}`);
      if (revBodies.has(`${digest}\0${ns}`)) continue;
      out.repaired++;
      if (!dryRun) {
        await this.kv.atomic().check(e).check({ key: K.rev(ns, digest), versionstamp: null })
          .delete(e.key).commit();
      }
    }
    for (const pair of revBodies) {
      if (bodyKeys.has(pair)) continue;
      const [digest, ns] = pair.split("\0");
      const rev = await this.kv.get(K.rev(ns, digest));
      if (!rev.value) continue;
      out.repaired++;
      if (!dryRun) await this.kv.atomic().check(rev).set(K.body(digest, ns), true).commit();
    }
    return out;
  }

  /** blob/<digest> entries, for the sweep's age and versionstamp checks. */
  async blobRecords(): Promise<Map<string, Deno.KvEntry<BlobRecord>>> {
    const out = new Map<string, Deno.KvEntry<BlobRecord>>();
    for await (const e of this.list<BlobRecord>(K.blobsAll())) out.set(e.key[1] as string, e);
    return out;
  }

  /** Drops a blob record whose bytes are gone and that nothing references. */
  async dropRecord(e: Deno.KvEntry<BlobRecord>): Promise<boolean> {
    const digest = e.key[1] as string;
    if (await hasAny(this.kv, K.owners(digest))) return false;
    const r = await this.kv.atomic().check(e)
      .check({ key: K.reclaim(digest), versionstamp: null })
      .delete(e.key).commit();
    return r.ok;
  }

  /** Upload sessions: yields each with its namespace, uuid and last activity. */
  async *uploads(): AsyncGenerator<
    { entry: Deno.KvEntry<UploadRecord>; ns: string; uuid: string }
  > {
    for await (const e of this.list<UploadRecord>(K.uploadsAll())) {
      yield { entry: e, ns: e.key[1] as string, uuid: e.key[2] as string };
    }
  }

  /** Removes an idle session unless it moved since it was read. */
  async dropUpload(e: Deno.KvEntry<UploadRecord>): Promise<boolean> {
    return (await this.kv.atomic().check(e).delete(e.key).commit()).ok;
  }

  /** Category-index keys of namespaces holding no revision, tag or upload session. */
  async *emptiedNamespaces(): AsyncGenerator<Deno.KvEntry<unknown>> {
    for await (const e of this.list(K.nsAll())) {
      const ns = e.key[1] as string;
      if (await hasAny(this.kv, K.revs(ns))) continue;
      if (await hasAny(this.kv, K.tags(ns))) continue;
      if (await hasAny(this.kv, K.uploadsOf(ns))) continue;
      yield e;
    }
  }

  /** Reaps an index key unless a write touched the namespace since it was read. */
  async dropNamespace(e: Deno.KvEntry<unknown>): Promise<boolean> {
    const ns = e.key[1] as string;
    // The namespace's version keys go with it: a later write creates them afresh.
    return (await this.kv.atomic().check(e).delete(e.key).delete(K.tagver(ns)).delete(
      K.unlinkver(ns),
    ).delete(K.refver(ns)).commit()).ok;
  }

  private list<T>(prefix: Deno.KvKey): AsyncIterableIterator<Deno.KvEntry<T>> {
    return this.kv.list<T>({ prefix }, { batchSize: BATCH });
  }
}
