// Starting an upload (SPEC §Blob upload, POST): a mount or a monolithic upload links a blob at
// once, anything else opens a session; and the quota's say over a link (`admitted`,
// `quotaRoom`), which completing a session asks too.
import {
  type Algorithm,
  type Digest,
  isAlgorithm,
  RegistryError,
  requireDigest,
  requireName,
  truncate,
} from "../oci/mod.ts";
import { TooLargeError } from "../storage/mod.ts";
import { Hasher } from "../streams/mod.ts";
import { type UploadRecord } from "../kv/mod.ts";
import { type LinkRead, NO_FACTS, type WriteFacts } from "../metadata/mod.ts";
import { type BodyInput, tooLarge, type UploadAppend, type UploadDeps } from "./upload_append.ts";

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

/** POST: a session started, or a blob linked by a mount or a monolithic upload. */
export class UploadStart {
  constructor(
    private readonly d: UploadDeps,
    private readonly appending: UploadAppend,
  ) {}

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
    this.appending.hashers.put(uuid, res.written, hasher);
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
  admitted<T>(
    ns: string,
    digest: string,
    size: number,
    commit: (likely: boolean) => Promise<T>,
  ): Promise<T> {
    return this.d.usage ? this.d.usage.admit(ns, digest, size, commit) : commit(true);
  }

  /** 403 DENIED (quota) when `size` more bytes of `digest` do not fit `ns`'s repository. */
  async quotaRoom(
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

  placed(digest: string): () => Promise<boolean> {
    return () => this.d.store.exists(digest);
  }
}
