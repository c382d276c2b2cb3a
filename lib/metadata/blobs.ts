// Blob ownership: which namespaces may read which digests.
import { RegistryError } from "../oci/errors.ts";
import { type BlobRecord, K, type LinkRecord } from "./keys.ts";
import { hasAny } from "./kv_util.ts";

export class BlobMeta {
  constructor(private readonly kv: Deno.Kv) {}

  async link(ns: string, digest: string): Promise<LinkRecord | null> {
    return (await this.kv.get<LinkRecord>(K.link(ns, digest))).value;
  }

  async blob(digest: string): Promise<BlobRecord | null> {
    return (await this.kv.get<BlobRecord>(K.blob(digest))).value;
  }

  /** Records that bytes for `digest` exist and that `ns` owns them: one commit. */
  async addLink(ns: string, digest: string, size: number): Promise<void> {
    const now = Date.now();
    const r = await this.kv.atomic()
      .set(K.blob(digest), { size, at: now } satisfies BlobRecord)
      .set(K.link(ns, digest), { size, at: now } satisfies LinkRecord)
      .set(K.owner(digest, ns), true)
      .commit();
    if (!r.ok) throw new Error("link commit failed");
  }

  /** Links an existing blob into `ns` (mount); false when the blob record is gone. */
  async mount(ns: string, digest: string): Promise<boolean> {
    const b = await this.kv.get<BlobRecord>(K.blob(digest));
    if (!b.value) return false;
    const r = await this.kv.atomic()
      .check(b)
      .set(K.link(ns, digest), { size: b.value.size, at: Date.now() } satisfies LinkRecord)
      .set(K.owner(digest, ns), true)
      .commit();
    return r.ok;
  }

  /** Namespaces that own `digest`, in key order, at most `limit`. */
  async owners(digest: string, limit = 100): Promise<string[]> {
    const out: string[] = [];
    for await (const e of this.kv.list({ prefix: K.owners(digest) }, { limit })) {
      out.push(e.key[2] as string);
    }
    return out;
  }

  /** SPEC: DELETE blob → 405 DENIED while a manifest of the namespace references it. */
  async unlink(ns: string, digest: string): Promise<void> {
    const link = await this.kv.get<LinkRecord>(K.link(ns, digest));
    if (!link.value) throw new RegistryError("BLOB_UNKNOWN", digest);
    if (await hasAny(this.kv, K.brefs(ns, digest))) {
      throw new RegistryError("DENIED", "blob is referenced by a manifest in this namespace", {
        status: 405,
      });
    }
    const r = await this.kv.atomic().check(link).delete(K.link(ns, digest)).delete(
      K.owner(digest, ns),
    ).commit();
    if (!r.ok) throw new RegistryError("BLOB_UNKNOWN", digest);
  }
}
