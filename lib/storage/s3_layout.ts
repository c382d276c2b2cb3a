// Where an S3 blob store keeps things (keys under key_prefix, s3_blob_store.ts's head) and what
// its parts share: the client, part size, the reserve check, reading a part back, assembling parts
// into one object server-side, and the pool of part buffers.
import { bareEtag, S3Client, type S3Settings } from "./s3_client.ts";
import type { StoreWatch } from "./watch.ts";

export interface S3StoreSettings extends S3Settings {
  keyPrefix: string;
  /** bytes per part, at least 5 MiB (S3's minimum for all but the last part) */
  partSize: number;
  presignTtlSecs: number;
}

export const MIN_PART_SIZE = 5 << 20;

/** parallel UploadPartCopy calls while assembling a large blob */
const COPY_CONCURRENCY = 4;

/** The bucket's layout and the operations the store's parts share. */
export class S3Layout {
  readonly client: S3Client;
  readonly prefix: string;
  readonly P: number;
  /**
   * `watch`: hears whether S3 answers, and refuses new bytes while the KV file's filesystem is
   * below its reserve (the bucket's own room is S3's to keep).
   */
  constructor(
    readonly s: S3StoreSettings,
    readonly watch: StoreWatch | null = null,
  ) {
    if (s.partSize < MIN_PART_SIZE) throw new Error(`multipart_part_size below 5 MiB`);
    this.client = new S3Client(s, watch?.blob ?? null);
    this.prefix = s.keyPrefix === "" ? "" : `${s.keyPrefix.replace(/\/+$/, "")}/`;
    this.P = s.partSize;
  }

  blobKey(digest: string): string {
    const [alg, hex] = digest.split(":");
    return `${this.prefix}blobs/${alg}/${hex.slice(0, 2)}/${hex}`;
  }
  uploadDir(uuid: string): string {
    if (!/^[A-Za-z0-9._-]+$/.test(uuid)) throw new Error(`invalid upload name ${uuid}`);
    return `${this.prefix}uploads/${uuid}/`;
  }
  partKey(uuid: string, k: number): string {
    return `${this.uploadDir(uuid)}${String(k).padStart(6, "0")}`;
  }

  /**
   * Whether the blob is already stored whole. Content-addressed bytes never need rewriting, and
   * rewriting them is not harmless everywhere: s3rver rewrites an object in place, cutting GETs
   * that are streaming it (seen as truncated bodies under concurrent pushes of one digest).
   */
  async holds(digest: string, size: number): Promise<boolean> {
    return (await this.client.head(this.blobKey(digest)))?.size === size;
  }

  /** Refuses new bytes below the reserve (the body, if any, is cancelled: it will not be read). */
  async admit(body: ReadableStream<Uint8Array>): Promise<void> {
    try {
      await this.watch?.admit();
    } catch (e) {
      await body.cancel().catch(() => {});
      throw e;
    }
  }

  /** Reads exactly `dst.length` bytes from the start of `key`; the object's ETag. */
  async readInto(key: string, dst: Uint8Array): Promise<string> {
    const res = await this.client.get(key, { start: 0, end: dst.byteLength - 1 });
    const etag = bareEtag(res.headers.get("etag"));
    let at = 0;
    for await (const c of res.body ?? ReadableStream.from([])) {
      const n = Math.min(c.byteLength, dst.byteLength - at);
      dst.set(c.subarray(0, n), at);
      at += n;
    }
    if (at !== dst.byteLength) {
      throw new Error(`${key}: ${at} bytes stored, ${dst.byteLength} committed`);
    }
    return etag;
  }

  /** Builds `dst` from parts already stored, server-side, via a multipart upload. */
  async assemble(
    uuid: string,
    dst: string,
    n: number,
    part: (k: number) => { src: string; end: number },
  ): Promise<void> {
    const uploadId = await this.client.createMultipart(dst);
    const marker = `${this.uploadDir(uuid)}mpu`;
    await this.client.put(marker, new TextEncoder().encode(JSON.stringify({ key: dst, uploadId })));
    const etags: string[] = new Array(n);
    let next = 0;
    const worker = async () => {
      while (next < n) {
        const k = next++;
        const p = part(k);
        etags[k] = await this.client.uploadPartCopy(dst, uploadId, k + 1, p.src, {
          start: 0,
          end: p.end,
        });
      }
    };
    try {
      await Promise.all(Array.from({ length: Math.min(COPY_CONCURRENCY, n) }, worker));
      await this.client.completeMultipart(dst, uploadId, etags);
    } catch (e) {
      await this.client.abortMultipart(dst, uploadId).catch(() => false);
      throw e;
    }
    await this.client.delete(marker);
  }
}

// Part buffers are reused: V8 frees large ArrayBuffers only under external-memory pressure, so a
// fresh 2×P per PATCH let RSS climb during pushes (the same effect fs_read.ts and body_chunks.ts measured).
const POOL_MAX = 8;
const pool: Uint8Array[] = [];
export function takeBuffer(size: number): Uint8Array {
  const i = pool.findIndex((b) => b.byteLength === size);
  if (i >= 0) return pool.splice(i, 1)[0];
  return new Uint8Array(size);
}
export function giveBuffer(b: Uint8Array): void {
  if (pool.length < POOL_MAX && b.byteOffset === 0 && b.byteLength === b.buffer.byteLength) {
    pool.push(b);
  }
}
