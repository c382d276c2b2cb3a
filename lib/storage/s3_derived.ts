// Derived files in the bucket (derived/<name>): one PUT when small, else parts assembled by a
// multipart upload, which S3 makes visible only whole.
import { assertDerivedName } from "./blob_store.ts";
import { giveBuffer, type S3Layout, takeBuffer } from "./s3_layout.ts";
import type { S3Uploads } from "./s3_uploads.ts";

/** The store's derived files. */
export class S3Derived {
  constructor(
    private readonly s3: S3Layout,
    private readonly uploads: Pick<S3Uploads, "deleteUpload">,
  ) {}

  private derivedKey(name: string): string {
    assertDerivedName(name);
    return `${this.s3.prefix}derived/${name}`;
  }

  async writeDerived(name: string, body: ReadableStream<Uint8Array>): Promise<number> {
    const key = this.derivedKey(name);
    await this.s3.admit(body);
    // Small files (the common case) are one PUT; larger ones a multipart upload, which S3
    // makes visible only whole, so a reader sees the old file or the new one.
    const tmp = `derived-${crypto.randomUUID()}`;
    let total = 0;
    let buf = takeBuffer(this.s3.P);
    let fill = 0;
    let parts = 0;
    try {
      for await (const chunk of body) {
        let at = 0;
        while (at < chunk.byteLength) {
          const take = Math.min(this.s3.P - fill, chunk.byteLength - at);
          buf.set(chunk.subarray(at, at + take), fill);
          fill += take;
          at += take;
          if (fill === this.s3.P) {
            await this.s3.client.put(this.s3.partKey(tmp, parts++), buf);
            fill = 0;
          }
        }
        total += chunk.byteLength;
      }
      if (parts === 0) {
        await this.s3.client.put(key, buf.slice(0, fill));
        return total;
      }
      if (fill > 0) await this.s3.client.put(this.s3.partKey(tmp, parts++), buf.subarray(0, fill));
      giveBuffer(buf);
      buf = new Uint8Array(0);
      const n = parts;
      await this.s3.assemble(tmp, key, n, (k) => ({
        src: this.s3.partKey(tmp, k),
        end: Math.min(this.s3.P, total - k * this.s3.P) - 1,
      }));
      return total;
    } finally {
      if (buf.byteLength > 0) giveBuffer(buf);
      if (parts > 0) await this.uploads.deleteUpload(tmp).catch(() => {});
    }
  }

  async readDerived(
    name: string,
    range?: { start: number; end: number },
  ): Promise<ReadableStream<Uint8Array>> {
    const res = await this.s3.client.get(this.derivedKey(name), range);
    return res.body ?? ReadableStream.from([]);
  }

  async deleteDerived(prefix: string): Promise<void> {
    const key = this.derivedKey(prefix);
    const keys = [key];
    for await (const o of this.s3.client.list(`${key}/`)) keys.push(o.key);
    await Promise.all(keys.map((k) => this.s3.client.delete(k)));
  }
}
