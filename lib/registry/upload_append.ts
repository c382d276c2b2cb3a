// Appending to an upload session (SPEC §Blob upload, PATCH rules 1-6): the session's record, a
// body appended under the session's lock and hashed as it is written, the new offset committed,
// and a session ended (rejected) when its bytes can no longer be trusted or fit.
import { parseContentRange, RegistryError, truncate, uploadConflict } from "../oci/mod.ts";
import { type BlobStore, ConcurrentUploadError, TooLargeError } from "../storage/mod.ts";
import type { Hasher } from "../streams/mod.ts";
import { type UploadRecord } from "../kv/mod.ts";
import { type BlobMeta, type UploadMeta } from "../metadata/mod.ts";
import type { WriteEffects } from "../effects/mod.ts";
import type { UsageLedger } from "../metadata/mod.ts";
import { HasherCache, KeyedLock } from "./hashers.ts";

export interface BodyInput {
  body: ReadableStream<Uint8Array> | null;
  /** declared Content-Length; null when the body is chunked or absent */
  contentLength: number | null;
}

export interface UploadDeps {
  store: BlobStore;
  blobs: BlobMeta;
  uploads: UploadMeta;
  maxBlobSize: number | null;
  /** quotas: a blob the repository has no room for is refused before its bytes move */
  usage?: UsageLedger;
  /** what linking a blob causes (blob.push events), committed with the link */
  effects: WriteEffects;
}

/** Sessions and their appends: the hashers and the per-session lock the other parts share. */
export class UploadAppend {
  readonly hashers: HasherCache;
  readonly lock = new KeyedLock();

  constructor(private readonly d: UploadDeps) {
    this.hashers = new HasherCache(d.store);
  }

  async status(ns: string, uuid: string): Promise<number> {
    return (await this.session(ns, uuid)).value.offset;
  }

  async session(ns: string, uuid: string): Promise<Deno.KvEntry<UploadRecord>> {
    const e = await this.d.uploads.get(ns, uuid);
    if (!e.value) throw new RegistryError("BLOB_UPLOAD_UNKNOWN", uuid);
    return e as Deno.KvEntry<UploadRecord>;
  }

  /** PATCH: appends one chunk; returns the committed offset. */
  patch(
    ns: string,
    uuid: string,
    input: BodyInput & { contentRange: string | null },
  ): Promise<number> {
    return this.lock.run(uuid, async () => {
      const entry = await this.session(ns, uuid);
      const { offset } = await this.append(ns, uuid, entry, input, input.contentRange);
      return offset;
    });
  }

  /**
   * Appends a body to a session under its lock, applying PATCH rules 1-6. Returns the session's
   * entry and hasher; `deferred`: the new offset is not committed yet (`moved` says whether
   * there is one to commit), the caller commits it or deletes the session.
   */
  async append(
    ns: string,
    uuid: string,
    entry: Deno.KvEntry<UploadRecord>,
    input: BodyInput,
    contentRange: string | null,
    deferred = false,
  ): Promise<
    { offset: number; hasher: Hasher; entry: Deno.KvEntry<UploadRecord>; moved: boolean }
  > {
    const rec = entry.value;
    let window: number | null = null;
    if (contentRange !== null) {
      const cr = parseContentRange(contentRange);
      const fail = (why: string) => {
        input.body?.cancel().catch(() => {});
        return new RegistryError("SIZE_INVALID", why, {
          headers: rangeHeaders(ns, uuid, rec.offset),
        });
      };
      if (!cr) throw fail(`malformed Content-Range ${truncate(contentRange)}`);
      if (cr.start !== rec.offset) {
        throw fail(`Content-Range starts at ${cr.start}, committed offset is ${rec.offset}`);
      }
      window = cr.end - cr.start + 1;
      if (input.contentLength !== null && input.contentLength !== window) {
        throw fail(
          `Content-Range covers ${window} bytes, Content-Length is ${input.contentLength}`,
        );
      }
    }
    const room = this.d.maxBlobSize === null
      ? Number.MAX_SAFE_INTEGER
      : this.d.maxBlobSize - rec.offset;
    if (input.contentLength !== null && input.contentLength > room) {
      await input.body?.cancel();
      await this.reject(ns, uuid);
      throw tooLarge();
    }
    const hasher = await this.hashers.take(uuid, rec.algorithm, rec.offset);
    // A chunked body may not overrun its window: read one byte past it to notice.
    const cap = window !== null && input.contentLength === null ? Math.min(window + 1, room) : room;
    let written: number;
    let cut: boolean;
    try {
      ({ written, cut } = await this.d.store.appendUpload(uuid, rec.offset, input.body, {
        maxBytes: cap,
        onChunk: (c) => hasher.update(c),
        unsized: input.contentLength === null,
      }));
    } catch (e) {
      if (e instanceof ConcurrentUploadError) throw await this.writtenTwice(ns, uuid, e);
      if (e instanceof TooLargeError) {
        await this.reject(ns, uuid);
        if (cap === room) throw tooLarge();
        throw new RegistryError(
          "SIZE_INVALID",
          "chunk overran its Content-Range window; session cancelled",
        );
      }
      throw e;
    }
    if (window !== null && input.contentLength === null && written !== window) {
      await this.reject(ns, uuid);
      throw new RegistryError(
        "SIZE_INVALID",
        `chunk of ${written} bytes did not fill its ${window}-byte window; session cancelled`,
      );
    }
    void cut; // a short body commits what arrived (PATCH rule 5)
    const offset = rec.offset + written;
    this.hashers.put(uuid, offset, hasher);
    // A completing PUT moves the offset only if it fails: on success the session goes in the
    // link commit, which checks the same entry (a commit saved per upload).
    if (written === 0 || deferred) return { offset, hasher, entry, moved: written > 0 };
    return { offset, hasher, entry: await this.advance(entry, offset), moved: false };
  }

  /** Commits a session's new offset; 409 when another writer changed the session meanwhile. */
  async advance(
    entry: Deno.KvEntry<UploadRecord>,
    offset: number,
  ): Promise<Deno.KvEntry<UploadRecord>> {
    const next = await this.d.uploads.advance(entry, offset);
    if (next) return next;
    throw uploadConflict("upload session changed concurrently");
  }

  /** Two processes wrote the session at once: its bytes are not the hashed ones; it ends. */
  async writtenTwice(
    ns: string,
    uuid: string,
    e: ConcurrentUploadError,
  ): Promise<RegistryError> {
    await this.reject(ns, uuid);
    return uploadConflict(`${e.message}; the session is cancelled, start the upload again`);
  }

  async reject(ns: string, uuid: string): Promise<void> {
    this.hashers.drop(uuid);
    await this.d.uploads.delete(ns, uuid);
    await this.d.store.deleteUpload(uuid);
  }
}

export const tooLarge = () =>
  new RegistryError("BLOB_UPLOAD_INVALID", "blob exceeds global.max_blob_size");

export function rangeHeaders(ns: string, uuid: string, offset: number): Record<string, string> {
  return {
    "Location": `/v2/${ns}/blobs/uploads/${uuid}`,
    "Range": `0-${offset > 0 ? offset - 1 : 0}`,
    "Docker-Upload-UUID": uuid,
  };
}
