// Reads behind the `/v2/_svc/` listings (SPEC §Extension endpoints): the category index, full
// counts per namespace, revisions with their parents, and upload sessions. Read-only.
import type { Platform } from "../oci/mod.ts";
import {
  K,
  listAll,
  type ReferrerRecord,
  type RevisionRecord,
  type UploadRecord,
} from "../kv/mod.ts";

export class SvcMeta {
  constructor(private readonly kv: Deno.Kv) {}

  /**
   * Namespaces in the category index, in name order. With `under`, only the names that could
   * belong to that repository: itself and everything sorting between it and `<under>0` (`/` is
   * the byte just before `0`), which the caller narrows with repositoryOf.
   */
  async *indexed(under?: string): AsyncGenerator<string> {
    const sel: Deno.KvListSelector = under === undefined
      ? { prefix: K.nsAll() }
      : { start: K.ns(under), end: K.ns(under + "0") };
    for await (const e of this.kv.list(sel, { batchSize: 500 })) yield e.key[1] as string;
  }

  /** Counts by full enumeration (keys only matter, but KV always returns values). */
  revisionCount(ns: string): Promise<number> {
    return this.count(K.revs(ns));
  }

  uploadCount(ns: string): Promise<number> {
    return this.count(K.uploadsOf(ns));
  }

  async revisions(ns: string): Promise<{ digest: string; rec: RevisionRecord }[]> {
    return (await listAll<RevisionRecord>(this.kv, { prefix: K.revs(ns) }))
      .map((e) => ({ digest: e.key[2] as string, rec: e.value }));
  }

  /** Indexes of `ns` naming `child`, with the platform the index gives it (null: none). */
  async parents(
    ns: string,
    child: string,
  ): Promise<{ digest: string; platform: Platform | null }[]> {
    return (await listAll<Platform | null>(this.kv, { prefix: K.mrefs(ns, child) }))
      .map((e) => ({ digest: e.key[3] as string, platform: e.value }));
  }

  /**
   * What the revisions listing reports of every revision of `ns`, read as four prefix scans over
   * the namespace instead of four reads per revision (a 10,000-revision namespace took 40,000
   * round trips). Each map is keyed by the revision's digest; key order within an entry is kept.
   */
  async namespaceFacts(ns: string, withPulls: boolean): Promise<NamespaceFacts> {
    const group = <V>(m: Map<string, V[]>, k: string, v: V) => {
      const list = m.get(k);
      if (list) list.push(v);
      else m.set(k, [v]);
    };
    const tags = new Map<string, string[]>();
    const parents = new Map<string, { digest: string; platform: Platform | null }[]>();
    const referrers = new Map<string, { digest: string; rec: ReferrerRecord }[]>();
    const lastPulled = new Map<string, number>();
    await Promise.all([
      (async () => {
        for await (const e of this.kv.list({ prefix: K.tagrevsIn(ns) }, { batchSize: 1000 })) {
          group(tags, e.key[2] as string, e.key[3] as string);
        }
      })(),
      (async () => {
        const sel = { prefix: K.mrefsIn(ns) };
        for await (const e of this.kv.list<Platform | null>(sel, { batchSize: 1000 })) {
          group(parents, e.key[2] as string, { digest: e.key[3] as string, platform: e.value });
        }
      })(),
      (async () => {
        const sel = { prefix: K.referrersIn(ns) };
        for await (const e of this.kv.list<ReferrerRecord>(sel, { batchSize: 1000 })) {
          group(referrers, e.key[2] as string, { digest: e.key[3] as string, rec: e.value });
        }
      })(),
      (async () => {
        if (!withPulls) return;
        const sel = { prefix: K.lastPullsIn(ns) };
        for await (const e of this.kv.list<Deno.KvU64>(sel, { batchSize: 1000 })) {
          lastPulled.set(e.key[2] as string, Number(e.value.value));
        }
      })(),
    ]);
    return { tags, parents, referrers, lastPulled };
  }

  async uploads(ns: string): Promise<{ uuid: string; rec: UploadRecord }[]> {
    return (await listAll<UploadRecord>(this.kv, { prefix: K.uploadsOf(ns) }))
      .map((e) => ({ uuid: e.key[2] as string, rec: e.value }));
  }

  private async count(prefix: Deno.KvKey): Promise<number> {
    let n = 0;
    for await (const _ of this.kv.list({ prefix }, { batchSize: 1000 })) n++;
    return n;
  }
}

export interface NamespaceFacts {
  tags: Map<string, string[]>;
  parents: Map<string, { digest: string; platform: Platform | null }[]>;
  referrers: Map<string, { digest: string; rec: ReferrerRecord }[]>;
  lastPulled: Map<string, number>;
}
