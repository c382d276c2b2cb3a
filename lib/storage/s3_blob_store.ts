// Blobs in an S3-compatible bucket. Layout under `key_prefix`:
//   blobs/<alg>/<hex[0:2]>/<hex>     content-addressed, written only whole (copy or complete)
//   uploads/<uuid>/<part>            an upload session's bytes, cut into parts of
//                                    multipart_part_size at fixed offsets (part k holds
//                                    [k·P, (k+1)·P)); the last part may be short
//   uploads/<uuid>/mpu               {key, uploadId} of a multipart upload being assembled,
//                                    so scrub can abort it when the assembling process died
//   derived/<name>                   derived files
//
// Why parts are plain objects and not the parts of an open multipart upload: S3 cannot read an
// unfinished multipart upload, and a session must stay readable — a PATCH landing on another
// process (or after a restart) re-hashes the bytes so far (lib/registry/hashers.ts), and
// pull-through followers tail a fill as it grows. The object a part lives in follows from the
// committed offset alone, so no part list needs to be kept anywhere: a PATCH at offset O
// rewrites part ⌊O/P⌋ (its first O mod P bytes plus the new ones, coalescing chunks under S3's
// 5 MiB part minimum) and appends whole parts after it. Completion assembles the parts into the
// blob's key server-side (CopyObject for one part, UploadPartCopy + CompleteMultipartUpload for
// more), after the caller verified the digest; docker-registry's s3 driver moves its _uploads
// the same way. Only a bounded buffer of two parts per upload is ever held in memory.
//
// Its parts: s3_layout.ts (keys, the client, assembling, part buffers), s3_uploads.ts (with
// s3_part_etags.ts), s3_derived.ts, s3_quarantine.ts.
import type { AppendResult, BlobStore, StoredObject, UploadReader } from "./blob_store.ts";
import type { S3Client } from "./s3_client.ts";
import type { StoreWatch } from "./watch.ts";
import { S3Layout, type S3StoreSettings } from "./s3_layout.ts";
import { S3Uploads } from "./s3_uploads.ts";
import { S3Derived } from "./s3_derived.ts";
import { S3Quarantine } from "./s3_quarantine.ts";

export { MIN_PART_SIZE, type S3StoreSettings } from "./s3_layout.ts";

export class S3BlobStore implements BlobStore {
  readonly client: S3Client;
  readonly #s3: S3Layout;
  readonly #uploads: S3Uploads;
  readonly #derived: S3Derived;
  readonly #quarantine: S3Quarantine;
  /**
   * `watch`: hears whether S3 answers, and refuses new bytes while the KV file's filesystem is
   * below its reserve (the bucket's own room is S3's to keep).
   */
  constructor(s: S3StoreSettings, watch: StoreWatch | null = null) {
    this.#s3 = new S3Layout(s, watch);
    this.client = this.#s3.client;
    this.#uploads = new S3Uploads(this.#s3);
    this.#derived = new S3Derived(this.#s3, this.#uploads);
    this.#quarantine = new S3Quarantine(this.#s3);
  }

  /** Fails early, at startup, when the bucket cannot be reached or the credentials are refused. */
  async init(): Promise<void> {
    for await (const _ of this.#s3.client.list(`${this.#s3.prefix}blobs/`)) break;
  }

  /** A presigned GET of a blob; `contentType` makes S3 answer with that Content-Type. */
  presign(digest: string, opts: { contentType?: string } = {}): Promise<string> {
    const q: Record<string, string> = {};
    if (opts.contentType) q["response-content-type"] = opts.contentType;
    return this.#s3.client.presign(this.#s3.blobKey(digest), this.#s3.s.presignTtlSecs, q);
  }

  async read(
    digest: string,
    range?: { start: number; end: number },
  ): Promise<ReadableStream<Uint8Array>> {
    const res = await this.#s3.client.get(this.#s3.blobKey(digest), range);
    return res.body ?? ReadableStream.from([]);
  }

  async readAll(digest: string): Promise<Uint8Array> {
    const res = await this.#s3.client.get(this.#s3.blobKey(digest));
    return new Uint8Array(await res.arrayBuffer());
  }

  async exists(digest: string): Promise<boolean> {
    return (await this.#s3.client.head(this.#s3.blobKey(digest))) !== null;
  }

  async put(digest: string, data: Uint8Array): Promise<void> {
    if (await this.#s3.holds(digest, data.byteLength)) return;
    await this.#s3.watch?.admit();
    await this.#s3.client.put(this.#s3.blobKey(digest), data);
  }

  async delete(digest: string): Promise<void> {
    await this.#s3.client.delete(this.#s3.blobKey(digest));
  }
  async *listBlobs(): AsyncGenerator<StoredObject> {
    const base = `${this.#s3.prefix}blobs/`;
    for await (const o of this.#s3.client.list(base)) {
      const m = /^([a-z0-9]+)\/[0-9a-f]{2}\/([0-9a-f]+)$/.exec(o.key.slice(base.length));
      if (!m) continue;
      yield { name: `${m[1]}:${m[2]}`, size: o.size, mtime: o.lastModified };
    }
  }

  // upload sessions (s3_uploads.ts)
  appendUpload(...a: Parameters<S3Uploads["appendUpload"]>): Promise<AppendResult> {
    return this.#uploads.appendUpload(...a);
  }
  readUpload(uuid: string, length: number): Promise<ReadableStream<Uint8Array>> {
    return this.#uploads.readUpload(uuid, length);
  }
  openUpload(uuid: string): Promise<UploadReader> {
    return this.#uploads.openUpload(uuid);
  }
  commitUpload(uuid: string, digest: string, size: number): Promise<void> {
    return this.#uploads.commitUpload(uuid, digest, size);
  }
  deleteUpload(uuid: string): Promise<void> {
    return this.#uploads.deleteUpload(uuid);
  }
  listUploads(): AsyncGenerator<StoredObject> {
    return this.#uploads.listUploads();
  }

  // derived files (s3_derived.ts)
  writeDerived(name: string, body: ReadableStream<Uint8Array>): Promise<number> {
    return this.#derived.writeDerived(name, body);
  }
  readDerived(...a: Parameters<S3Derived["readDerived"]>): Promise<ReadableStream<Uint8Array>> {
    return this.#derived.readDerived(...a);
  }
  deleteDerived(prefix: string): Promise<void> {
    return this.#derived.deleteDerived(prefix);
  }

  // quarantine (s3_quarantine.ts)
  quarantine(digest: string): Promise<boolean> {
    return this.#quarantine.quarantine(digest);
  }
  listQuarantined(): AsyncGenerator<StoredObject> {
    return this.#quarantine.listQuarantined();
  }
  deleteQuarantined(digest: string): Promise<void> {
    return this.#quarantine.deleteQuarantined(digest);
  }
}
