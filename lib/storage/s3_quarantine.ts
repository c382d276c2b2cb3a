// Quarantined blobs in the bucket (quarantine/<alg>/<hex>): copied out of blobs/ server-side and
// kept for an operator, up to CopyObject's limit.
import type { StoredObject } from "./blob_store.ts";
import type { S3Layout } from "./s3_layout.ts";

/** CopyObject's limit. */
const MAX_COPY_SIZE = 5 * 1024 ** 3;

/** The store's quarantine. */
export class S3Quarantine {
  constructor(private readonly s3: S3Layout) {}

  private quarantineKey(digest: string): string {
    const [alg, hex] = digest.split(":");
    return `${this.s3.prefix}quarantine/${alg}/${hex}`;
  }

  /**
   * A server-side copy to `quarantine/`, then the blob's key goes. Past CopyObject's 5 GiB the
   * copy is not kept (an assembly by ranges would cost a multipart upload for evidence only).
   */
  async quarantine(digest: string): Promise<boolean> {
    const key = this.s3.blobKey(digest);
    const head = await this.s3.client.head(key);
    if (!head) throw new Deno.errors.NotFound(`s3 object ${key}`);
    const kept = head.size <= MAX_COPY_SIZE;
    if (kept) await this.s3.client.copy(key, this.quarantineKey(digest));
    await this.s3.client.delete(key);
    return kept;
  }

  async *listQuarantined(): AsyncGenerator<StoredObject> {
    const base = `${this.s3.prefix}quarantine/`;
    for await (const o of this.s3.client.list(base)) {
      const m = /^([a-z0-9]+)\/([0-9a-f]+)$/.exec(o.key.slice(base.length));
      if (m) yield { name: `${m[1]}:${m[2]}`, size: o.size, mtime: o.lastModified };
    }
  }

  async deleteQuarantined(digest: string): Promise<void> {
    await this.s3.client.delete(this.quarantineKey(digest));
  }
}
