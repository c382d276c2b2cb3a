// Blob upload sessions: POST (start, monolithic, mount), PATCH, GET status, PUT, DELETE.
// SPEC §Blob upload and its state table.
import {
  type Algorithm,
  type Digest,
  isAlgorithm,
  parseContentRange,
  parseDigest,
  RegistryError,
  requireDigest,
  requireName,
  truncate,
  uploadConflict,
} from "../oci/mod.ts";
import { type BlobStore, ConcurrentUploadError, TooLargeError } from "../storage/mod.ts";
import { Hasher } from "../streams/mod.ts";
import { type UploadRecord } from "../kv/mod.ts";
import {
  type BlobMeta,
  type LinkRead,
  NO_FACTS,
  type UploadMeta,
  type WriteFacts,
} from "../metadata/mod.ts";
import type { WriteEffects } from "../effects/mod.ts";
import type { UsageLedger } from "../metadata/mod.ts";
import { HasherCache, KeyedLock } from "./hashers.ts";

export interface BodyInput {
  body: ReadableStream<Uint8Array> | null;
  /** declared Content-Length; null when the body is chunked or absent */
  contentLength: number | null;
}

export interface StartInput extends BodyInput {
  digest: string | null;
  digestAlgorithm: string | null;
  mount: string | null;
  from: string | null;
  /** mount rules 1-2: may the caller read `digest` from `ns`? (the source's `get-blob`) */
  canRead: (ns: string, digest: string) => boolean | Promise<boolean>;
}

export type StartResult =
  /** `linked`: this request linked the blob (false: `ns` had it already) */
  | { kind: "created"; digest: string; linked: boolean }
  | { kind: "session"; uuid: string; offset: number };

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

export class Uploads {
  private readonly hashers: HasherCache;
  private readonly lock = new KeyedLock();

  constructor(private readonly d: UploadDeps) {
    this.hashers = new HasherCache(d.store);
  }

  /**
   * POST: a monolithic upload or a mount links a blob at once (a blob.push, whose required
   * webhooks are asked first); otherwise a session starts.
   */
  async start(ns: string, input: StartInput): Promise<StartResult> {
    const named = input.digest ?? input.mount;
    // Neither: a session starts, linking nothing.
    if (named === null) return await this.startWith(ns, input, NO_FACTS);
    const fx = await this.d.effects.begin({ kind: "blob-push", ns, digest: named });
    try {
      const r = await this.startWith(ns, input, fx);
      // The namespace had the blob already: nothing was written, the push still happened.
      if (r.kind === "created" && !r.linked) {
        fx.unwritten({ kind: "blob-linked", ns, digest: r.digest });
      }
      return r;
    } finally {
      await fx.committed();
    }
  }

  private async startWith(
    ns: string,
    input: StartInput,
    fx: WriteFacts,
  ): Promise<StartResult> {
    let algorithm: Algorithm = "sha256";
    let pinned = false;
    if (input.digestAlgorithm !== null) {
      if (!isAlgorithm(input.digestAlgorithm)) {
        throw new RegistryError(
          "UNSUPPORTED",
          `unsupported digest-algorithm ${truncate(input.digestAlgorithm)}`,
        );
      }
      algorithm = input.digestAlgorithm;
      pinned = true;
    }
    if (input.mount !== null) {
      const d = requireDigest(input.mount, "mount digest");
      if (input.from !== null) requireName(input.from);
      await input.body?.cancel();
      if (await this.d.blobs.link(ns, d.value)) {
        return { kind: "created", digest: d.value, linked: false };
      }
      if (await this.tryMount(ns, d.value, input, fx)) {
        return { kind: "created", digest: d.value, linked: true };
      }
      return await this.newSession(ns, algorithm, pinned, null);
    }
    if (input.digest !== null) {
      const d = requireDigest(input.digest);
      if (pinned && d.algorithm !== algorithm) {
        throw new RegistryError(
          "DIGEST_INVALID",
          "digest does not use the session's digest-algorithm",
        );
      }
      const link = await this.d.blobs.linkRead(ns, d.value);
      if (link.link.value) {
        await input.body?.cancel();
        return { kind: "created", digest: d.value, linked: false };
      }
      if (input.contentLength !== null) {
        await this.monolithic(ns, d, input, fx, link);
        return { kind: "created", digest: d.value, linked: true };
      }
      return await this.newSession(ns, d.algorithm, pinned, input.body);
    }
    await input.body?.cancel();
    return await this.newSession(ns, algorithm, pinned, null);
  }

  private async tryMount(
    ns: string,
    digest: string,
    input: StartInput,
    fx: WriteFacts,
  ): Promise<boolean> {
    const sources = input.from !== null ? [input.from] : await this.d.blobs.owners(digest);
    for (const src of sources) {
      if (src === ns || !(await this.d.blobs.link(src, digest))) continue;
      if (!(await input.canRead(src, digest))) continue;
      const size = this.d.usage ? (await this.d.blobs.blob(digest))?.size ?? 0 : 0;
      return await this.admitted(
        ns,
        digest,
        size,
        () => this.d.blobs.mount(ns, digest, fx),
      );
    }
    return false;
  }

  private async newSession(
    ns: string,
    algorithm: Algorithm,
    pinned: boolean,
    body: ReadableStream<Uint8Array> | null,
  ): Promise<StartResult> {
    const uuid = crypto.randomUUID();
    const hasher = new Hasher(algorithm);
    // Without a body the upload file is left to the first append, which creates it (docker's
    // POST: two file operations fewer per push).
    const res = body === null ? { written: 0 } : await this.d.store.appendUpload(uuid, 0, body, {
      maxBytes: this.d.maxBlobSize ?? Number.MAX_SAFE_INTEGER,
      onChunk: (c) => hasher.update(c),
      // A body here came without a Content-Length (a monolithic POST has one).
      unsized: true,
    }).catch(async (e) => {
      await this.d.store.deleteUpload(uuid);
      if (e instanceof TooLargeError) throw tooLarge();
      throw e;
    });
    const rec: UploadRecord = { offset: res.written, algorithm, pinned, startedAt: Date.now() };
    await this.d.uploads.create(ns, uuid, rec);
    this.hashers.put(uuid, res.written, hasher);
    return { kind: "session", uuid, offset: res.written };
  }

  /** POST ?digest= with a declared length: the body is the whole blob. Mismatch stores nothing. */
  private async monolithic(
    ns: string,
    d: Digest,
    input: BodyInput,
    fx: WriteFacts,
    link: LinkRead,
  ): Promise<void> {
    const declared = input.contentLength!;
    if (this.d.maxBlobSize !== null && declared > this.d.maxBlobSize) {
      await input.body?.cancel();
      throw tooLarge();
    }
    // Refused before a byte is stored when the declared size cannot fit (the link commit still
    // decides: this read may race other pushes).
    await this.quotaRoom(ns, d.value, declared, input.body);
    const uuid = crypto.randomUUID();
    const hasher = new Hasher(d.algorithm);
    try {
      const res = await this.d.store.appendUpload(uuid, 0, input.body, {
        maxBytes: declared,
        onChunk: (c) => hasher.update(c),
      });
      if (res.written !== declared) {
        throw new RegistryError(
          "DIGEST_INVALID",
          `body ended after ${res.written} of ${declared} bytes`,
        );
      }
      if (hasher.peek() !== d.value) {
        throw new RegistryError("DIGEST_INVALID", `content does not hash to ${d.value}`);
      }
      const reserved = await this.d.blobs.reserve(d.value, declared);
      // This request's own uuid, written from 0 by the append above, which synced it.
      await this.d.store.commitUpload(uuid, d.value, declared, { synced: true });
      await this.admitted(ns, d.value, declared, () =>
        this.d.blobs.addLink(
          ns,
          d.value,
          declared,
          reserved,
          this.placed(d.value),
          fx,
          link,
        ));
    } catch (e) {
      // On success the file was renamed into place: nothing is left to remove.
      await this.d.store.deleteUpload(uuid);
      throw e;
    }
  }

  /** A linking commit adding up to `size` bytes, admitted by the quota ledger (usage.ts). */
  private admitted<T>(
    ns: string,
    digest: string,
    size: number,
    commit: (likely: boolean) => Promise<T>,
  ): Promise<T> {
    return this.d.usage ? this.d.usage.admit(ns, digest, size, commit) : commit(true);
  }

  /** 403 DENIED (quota) when `size` more bytes of `digest` do not fit `ns`'s repository. */
  private async quotaRoom(
    ns: string,
    digest: string,
    size: number,
    body: ReadableStream<Uint8Array> | null = null,
  ): Promise<void> {
    const usage = this.d.usage;
    if (!usage?.limited(ns)) return; // no quota: nothing to refuse, so nothing to read
    try {
      await usage.planAdd(ns, digest, size); // reads only; throws past the quota
    } catch (e) {
      await body?.cancel();
      throw e;
    }
  }

  private placed(digest: string): () => Promise<boolean> {
    return () => this.d.store.exists(digest);
  }

  async status(ns: string, uuid: string): Promise<number> {
    return (await this.session(ns, uuid)).value.offset;
  }

  private async session(ns: string, uuid: string): Promise<Deno.KvEntry<UploadRecord>> {
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
  private async append(
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
  private async advance(
    entry: Deno.KvEntry<UploadRecord>,
    offset: number,
  ): Promise<Deno.KvEntry<UploadRecord>> {
    const next = await this.d.uploads.advance(entry, offset);
    if (next) return next;
    throw uploadConflict("upload session changed concurrently");
  }

  /** Two processes wrote the session at once: its bytes are not the hashed ones; it ends. */
  private async writtenTwice(
    ns: string,
    uuid: string,
    e: ConcurrentUploadError,
  ): Promise<RegistryError> {
    await this.reject(ns, uuid);
    return uploadConflict(`${e.message}; the session is cancelled, start the upload again`);
  }

  private async reject(ns: string, uuid: string): Promise<void> {
    this.hashers.drop(uuid);
    await this.d.uploads.delete(ns, uuid);
    await this.d.store.deleteUpload(uuid);
  }

  /**
   * PUT ?digest=: appends an optional final chunk and completes the session. A final chunk's
   * Content-Range follows the PATCH rules: one not resuming at the committed offset is 416.
   */
  async complete(
    ns: string,
    uuid: string,
    digestParam: string | null,
    input: BodyInput & { contentRange?: string | null },
  ): Promise<{ digest: string; size: number }> {
    // Required webhooks answer before the session is touched.
    const fx = await this.d.effects.begin({ kind: "blob-push", ns, digest: digestParam });
    try {
      return await this.completeWith(ns, uuid, digestParam, input, fx);
    } finally {
      await fx.committed();
    }
  }

  private completeWith(
    ns: string,
    uuid: string,
    digestParam: string | null,
    input: BodyInput & { contentRange?: string | null },
    fx: WriteFacts,
  ): Promise<{ digest: string; size: number }> {
    return this.lock.run(uuid, async () => {
      // A well-formed digest: the link its completion checks is read with the session.
      const named = digestParam === null ? null : parseDigest(digestParam);
      let link: LinkRead | undefined;
      let entry0: Deno.KvEntry<UploadRecord>;
      if (named) {
        const [session, seen] = await this.d.uploads.getWithLink(ns, uuid, named.value);
        if (!session.value) throw new RegistryError("BLOB_UPLOAD_UNKNOWN", uuid);
        entry0 = session as Deno.KvEntry<UploadRecord>;
        link = seen;
      } else entry0 = await this.session(ns, uuid);
      const d = requireDigest(digestParam);
      if (entry0.value.pinned && d.algorithm !== entry0.value.algorithm) {
        await input.body?.cancel();
        throw new RegistryError(
          "DIGEST_INVALID",
          `session hashes ${entry0.value.algorithm}, digest is ${d.algorithm}`,
        );
      }
      let { offset, hasher, entry, moved } = await this.append(
        ns,
        uuid,
        entry0,
        input,
        input.contentRange ?? null,
        true,
      );
      // A refused completion keeps the final chunk, as a PATCH would have.
      const keepChunk = async () => {
        if (moved) entry = await this.advance(entry, offset);
        moved = false;
      };
      if (hasher.algorithm !== d.algorithm) {
        hasher = await this.hashers.rehash(uuid, d.algorithm, offset);
      }
      if (hasher.peek() !== d.value) {
        this.hashers.put(uuid, offset, hasher);
        await keepChunk();
        throw new RegistryError("DIGEST_INVALID", `uploaded content does not hash to ${d.value}`);
      }
      const done = await this.admitted(ns, d.value, offset, async (likely) => {
        // Past the quota the session stays as it is: the client may free room and PUT again.
        if (!likely) {
          try {
            await this.quotaRoom(ns, d.value, offset);
          } catch (e) {
            await keepChunk();
            throw e;
          }
        }
        const reserved = await this.d.blobs.reserve(d.value, offset);
        try {
          // A final chunk (written under this session's lock, from the committed offset, which
          // it truncated the file to first, and synced) leaves the file exact and durable; with
          // no body, bytes of a PATCH that died mid-write may lie past the offset.
          await this.d.store.commitUpload(uuid, d.value, offset, { synced: moved });
        } catch (e) {
          if (e instanceof ConcurrentUploadError) throw await this.writtenTwice(ns, uuid, e);
          throw e;
        }
        this.hashers.drop(uuid);
        const placed = this.placed(d.value);
        try {
          return await this.d.uploads.complete(
            entry,
            ns,
            d.value,
            offset,
            reserved,
            placed,
            fx,
            link,
          );
        } catch (e) {
          // A concurrent push took the last room: the bytes already moved to the blob path
          // (unlinked, so scrub reclaims them), so the session cannot complete again.
          if (e instanceof RegistryError && e.code === "DENIED") {
            await this.d.uploads.delete(ns, uuid);
          }
          throw e;
        }
      });
      if (!done) {
        throw new RegistryError("BLOB_UPLOAD_UNKNOWN", "upload session completed concurrently");
      }
      return { digest: d.value, size: offset };
    });
  }

  cancel(ns: string, uuid: string): Promise<void> {
    return this.lock.run(uuid, async () => {
      await this.session(ns, uuid);
      await this.reject(ns, uuid);
    });
  }
}

const tooLarge = () =>
  new RegistryError("BLOB_UPLOAD_INVALID", "blob exceeds global.max_blob_size");

export function rangeHeaders(ns: string, uuid: string, offset: number): Record<string, string> {
  return {
    "Location": `/v2/${ns}/blobs/uploads/${uuid}`,
    "Range": `0-${offset > 0 ? offset - 1 : 0}`,
    "Docker-Upload-UUID": uuid,
  };
}
