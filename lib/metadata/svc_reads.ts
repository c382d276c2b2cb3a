// Reads behind the `/v2/_svc/` listings (SPEC §Extension endpoints): the category index, full
// counts per namespace, revisions with their parents, and upload sessions. Read-only.
import type { Platform } from "../oci/manifest.ts";
import { K, type RevisionRecord, type UploadRecord } from "./keys.ts";
import { listAll } from "./kv_util.ts";

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
