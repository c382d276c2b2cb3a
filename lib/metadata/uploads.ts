// Upload session records. Bytes live in the blob store under the session's uuid.
import { K, type UploadRecord } from "./keys.ts";

export class UploadMeta {
  constructor(private readonly kv: Deno.Kv) {}

  async create(ns: string, uuid: string, rec: UploadRecord): Promise<void> {
    await this.kv.set(K.upload(ns, uuid), rec);
  }

  get(ns: string, uuid: string): Promise<Deno.KvEntryMaybe<UploadRecord>> {
    return this.kv.get<UploadRecord>(K.upload(ns, uuid));
  }

  /** Moves the committed offset; false when another writer changed the session meanwhile. */
  async advance(entry: Deno.KvEntry<UploadRecord>, offset: number): Promise<boolean> {
    const r = await this.kv.atomic().check(entry).set(entry.key, { ...entry.value, offset })
      .commit();
    return r.ok;
  }

  async delete(ns: string, uuid: string): Promise<void> {
    await this.kv.delete(K.upload(ns, uuid));
  }

  /**
   * Completes a session: the session record goes and the blob is linked into `ns`, in one
   * commit guarded by the session's versionstamp so a session completes at most once.
   */
  async complete(
    entry: Deno.KvEntry<UploadRecord>,
    ns: string,
    digest: string,
    size: number,
  ): Promise<boolean> {
    const now = Date.now();
    const r = await this.kv.atomic()
      .check(entry)
      .delete(entry.key)
      .set(K.blob(digest), { size, at: now })
      .set(K.link(ns, digest), { size, at: now })
      .set(K.owner(digest, ns), true)
      .commit();
    return r.ok;
  }
}
