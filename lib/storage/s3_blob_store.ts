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
import {
  type AppendOptions,
  type AppendResult,
  assertDerivedName,
  type BlobStore,
  ConcurrentUploadError,
  type StoredObject,
  TooLargeError,
  type UploadReader,
} from "./blob_store.ts";
import { bodyChunks } from "./body_chunks.ts";
import { bareEtag, S3Client, type S3Settings } from "./s3_client.ts";
import type { StoreWatch } from "./watch.ts";

export interface S3StoreSettings extends S3Settings {
  keyPrefix: string;
  /** bytes per part, at least 5 MiB (S3's minimum for all but the last part) */
  partSize: number;
  presignTtlSecs: number;
}

export const MIN_PART_SIZE = 5 << 20;

/**
 * What readers of a growing upload in this process (pull-through followers, which always run
 * where their fill writes) need beyond the stored parts: the part being filled, not yet sent,
 * and for an upload just committed, the blob its bytes moved to. Advisory and bounded: a
 * reader in another process reads the stored parts only.
 */
const filling = new Map<string, Map<number, { buf: Uint8Array; fill: number }>>();
const committed = new Map<string, string>();
const COMMITTED_KEPT = 1024;
/** parallel UploadPartCopy calls while assembling a large blob */
const COPY_CONCURRENCY = 4;
/** Sessions whose part ETags are remembered: more than the hasher cache keeps (hashers.ts). */
const SEEN_KEPT = 8192;

export class S3BlobStore implements BlobStore {
  readonly client: S3Client;
  private readonly prefix: string;
  private readonly P: number;
  /**
   * Per upload session, the ETag of each part as this process last wrote or read it, i.e. of the
   * bytes its hasher saw. Two processes writing one session (a client sending the same PATCH to
   * two replicas) can leave a part holding the loser's bytes while the winner's hasher holds the
   * digest of its own: completion checks every part's ETag against these before assembling, so
   * such a session fails instead of storing bytes that do not hash to the digest. A session this
   * process knows nothing of is rehashed from its parts first (hashers.ts), which fills this in.
   */
  private readonly seen = new Map<string, Map<number, string>>();
  /**
   * `watch`: hears whether S3 answers, and refuses new bytes while the KV file's filesystem is
   * below its reserve (the bucket's own room is S3's to keep).
   */
  constructor(
    private readonly s: S3StoreSettings,
    private readonly watch: StoreWatch | null = null,
  ) {
    if (s.partSize < MIN_PART_SIZE) throw new Error(`multipart_part_size below 5 MiB`);
    this.client = new S3Client(s, watch?.blob ?? null);
    this.prefix = s.keyPrefix === "" ? "" : `${s.keyPrefix.replace(/\/+$/, "")}/`;
    this.P = s.partSize;
  }

  private see(uuid: string, k: number, etag: string): void {
    let parts = this.seen.get(uuid);
    // Touched sessions move to the back, as the hasher cache's do on every PATCH: a long upload
    // must not lose its ETags to newer sessions while its hasher is still cached.
    if (parts) this.seen.delete(uuid);
    else {
      if (this.seen.size >= SEEN_KEPT) this.seen.delete(this.seen.keys().next().value!);
      parts = new Map();
    }
    this.seen.set(uuid, parts);
    parts.set(k, etag);
  }

  /** Part `k` of `uuid` still holds the bytes this process saw (see `seen`). */
  private checkSeen(uuid: string, k: number, etag: string): void {
    const want = this.seen.get(uuid)?.get(k);
    if (want === undefined || want !== etag) {
      throw new ConcurrentUploadError(
        `upload ${uuid}: part ${k} was written by another process meanwhile`,
      );
    }
  }

  /** Fails early, at startup, when the bucket cannot be reached or the credentials are refused. */
  async init(): Promise<void> {
    for await (const _ of this.client.list(`${this.prefix}blobs/`)) break;
  }

  private blobKey(digest: string): string {
    const [alg, hex] = digest.split(":");
    return `${this.prefix}blobs/${alg}/${hex.slice(0, 2)}/${hex}`;
  }
  private uploadDir(uuid: string): string {
    if (!/^[A-Za-z0-9._-]+$/.test(uuid)) throw new Error(`invalid upload name ${uuid}`);
    return `${this.prefix}uploads/${uuid}/`;
  }
  private partKey(uuid: string, k: number): string {
    return `${this.uploadDir(uuid)}${String(k).padStart(6, "0")}`;
  }
  private derivedKey(name: string): string {
    assertDerivedName(name);
    return `${this.prefix}derived/${name}`;
  }

  /** A presigned GET of a blob; `contentType` makes S3 answer with that Content-Type. */
  presign(digest: string, opts: { contentType?: string } = {}): Promise<string> {
    const q: Record<string, string> = {};
    if (opts.contentType) q["response-content-type"] = opts.contentType;
    return this.client.presign(this.blobKey(digest), this.s.presignTtlSecs, q);
  }

  async read(
    digest: string,
    range?: { start: number; end: number },
  ): Promise<ReadableStream<Uint8Array>> {
    const res = await this.client.get(this.blobKey(digest), range);
    return res.body ?? ReadableStream.from([]);
  }

  async readAll(digest: string): Promise<Uint8Array> {
    const res = await this.client.get(this.blobKey(digest));
    return new Uint8Array(await res.arrayBuffer());
  }

  async exists(digest: string): Promise<boolean> {
    return (await this.client.head(this.blobKey(digest))) !== null;
  }

  async put(digest: string, data: Uint8Array): Promise<void> {
    if (await this.holds(digest, data.byteLength)) return;
    await this.watch?.admit();
    await this.client.put(this.blobKey(digest), data);
  }

  /**
   * Whether the blob is already stored whole. Content-addressed bytes never need rewriting, and
   * rewriting them is not harmless everywhere: s3rver rewrites an object in place, cutting GETs
   * that are streaming it (seen as truncated bodies under concurrent pushes of one digest).
   */
  private async holds(digest: string, size: number): Promise<boolean> {
    return (await this.client.head(this.blobKey(digest)))?.size === size;
  }

  async delete(digest: string): Promise<void> {
    await this.client.delete(this.blobKey(digest));
  }

  async appendUpload(
    uuid: string,
    offset: number,
    body: ReadableStream<Uint8Array> | null,
    opts: AppendOptions,
  ): Promise<AppendResult> {
    this.uploadDir(uuid);
    if (!body) return { written: 0, cut: false };
    await this.admit(body);
    const P = this.P;
    let k = Math.floor(offset / P);
    let fill = offset - k * P;
    // Part buffers are P bytes, pooled, except for a body known to end sooner (a monolithic
    // push of a config or a small layer): then exactly what it needs. The next part's buffer is
    // taken only once its first byte arrives, so a body that ends on a part boundary does not
    // hold a second P bytes for nothing.
    const release = (b: Uint8Array) => {
      if (b.byteLength === P) giveBuffer(b);
    };
    const want = Math.min(P, fill + Math.max(0, opts.maxBytes));
    let buf: Uint8Array | null = want < P ? new Uint8Array(want) : takeBuffer(P);
    let spare: Uint8Array | null = null;
    // Bytes of part k past `offset` were never acknowledged: only its first `fill` are kept.
    if (fill > 0) {
      try {
        const etag = await this.readInto(this.partKey(uuid, k), buf.subarray(0, fill));
        // Those bytes are hashed already; they must be the ones that were.
        this.checkSeen(uuid, k, etag);
      } catch (e) {
        release(buf);
        throw e;
      }
    }
    let dirty = false;
    const live = new Map<number, { buf: Uint8Array; fill: number }>();
    filling.set(uuid, live);
    // One part uploads while the next fills: the body is not held up by S3's latency.
    let inFlight: Promise<Error | null> = Promise.resolve(null);
    const flush = async (n: number, part: Uint8Array, length: number) => {
      const err = await inFlight;
      if (err) throw err;
      // Readable from memory until its PUT is done.
      live.set(n, { buf: part, fill: length });
      inFlight = this.client.put(this.partKey(uuid, n), part.subarray(0, length)).then(
        (etag) => (this.see(uuid, n, etag), null),
        (e) => e as Error,
      ).finally(() => {
        live.delete(n);
        if (spare === null && part.byteLength === P) spare = part;
        else release(part);
      });
    };
    let written = 0;
    let cut = false;
    let tooLarge = false;
    const chunks = bodyChunks(body, opts.unsized === true);
    try {
      for (;;) {
        let r: IteratorResult<Uint8Array>;
        try {
          r = await chunks.next();
        } catch {
          cut = true;
          break;
        }
        if (r.done) break;
        let chunk = r.value;
        if (written + chunk.byteLength > opts.maxBytes) {
          // Keep what fits so a window check (416) can still see a complete prefix.
          chunk = chunk.subarray(0, Math.max(0, opts.maxBytes - written));
          tooLarge = true;
        }
        let at = 0;
        while (at < chunk.byteLength) {
          if (buf === null) {
            buf = spare ?? takeBuffer(P);
            spare = null;
          } else if (fill === buf.byteLength) {
            // a sized first buffer outgrown (maxBytes bounds the body, so not expected)
            const big = takeBuffer(P);
            big.set(buf.subarray(0, fill));
            buf = big;
          }
          const take = Math.min(buf.byteLength - fill, chunk.byteLength - at);
          buf.set(chunk.subarray(at, at + take), fill);
          fill += take;
          at += take;
          dirty = true;
          if (fill === P) {
            await flush(k, buf, P);
            k++;
            fill = 0;
            dirty = false;
            buf = null;
          }
        }
        if (buf) live.set(k, { buf, fill });
        if (chunk.byteLength > 0) opts.onChunk(chunk);
        written += chunk.byteLength;
        if (tooLarge) break;
      }
      if (dirty) await flush(k, buf!, fill);
      else if (buf) release(buf);
      const err = await inFlight;
      if (err) throw err;
    } finally {
      if (filling.get(uuid) === live) filling.delete(uuid);
      await chunks.return(undefined).catch(() => {});
      if (spare) giveBuffer(spare);
    }
    if (tooLarge) throw new TooLargeError(`more than ${opts.maxBytes} bytes`);
    return { written, cut };
  }

  /** Refuses new bytes below the reserve (the body, if any, is cancelled: it will not be read). */
  private async admit(body: ReadableStream<Uint8Array>): Promise<void> {
    try {
      await this.watch?.admit();
    } catch (e) {
      await body.cancel().catch(() => {});
      throw e;
    }
  }

  /** Reads exactly `dst.length` bytes from the start of `key`; the object's ETag. */
  private async readInto(key: string, dst: Uint8Array): Promise<string> {
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

  readUpload(uuid: string, length: number): Promise<ReadableStream<Uint8Array>> {
    this.uploadDir(uuid);
    return Promise.resolve(ReadableStream.from(this.uploadBytes(uuid, length)));
  }

  private async *uploadBytes(uuid: string, length: number): AsyncGenerator<Uint8Array> {
    for (let k = 0; k * this.P < length; k++) {
      const end = Math.min(this.P, length - k * this.P) - 1;
      const res = await this.client.get(this.partKey(uuid, k), { start: 0, end });
      this.see(uuid, k, bareEtag(res.headers.get("etag")));
      let got = 0;
      for await (const c of res.body ?? ReadableStream.from([])) {
        got += c.byteLength;
        yield c;
      }
      if (got !== end + 1) throw new Error(`upload ${uuid} part ${k}: ${got} of ${end + 1} bytes`);
    }
  }

  openUpload(uuid: string): Promise<UploadReader> {
    this.uploadDir(uuid);
    const P = this.P;
    return Promise.resolve({
      readAt: async (position: number, buf: Uint8Array): Promise<number> => {
        const k = Math.floor(position / P);
        const off = position - k * P;
        const want = Math.min(buf.byteLength, P - off);
        if (want <= 0) return 0;
        const part = filling.get(uuid)?.get(k);
        if (part && off < part.fill) {
          const n = Math.min(want, part.fill - off);
          buf.set(part.buf.subarray(off, off + n));
          return n;
        }
        const digest = committed.get(uuid);
        if (digest) return await this.readBlobAt(digest, position, buf);
        const res = await this.client.request("GET", this.partKey(uuid, k), {
          headers: { range: `bytes=${off}-${off + want - 1}` },
          accept: [416],
        });
        if (res.status === 404 || res.status === 416) {
          await res.body?.cancel();
          // Committed meanwhile (its parts deleted): the bytes are in the blob now.
          const moved = committed.get(uuid);
          if (moved) return await this.readBlobAt(moved, position, buf);
          return 0; // not written yet: nothing past the bytes so far
        }
        let at = 0;
        for await (const c of res.body ?? ReadableStream.from([])) {
          const n = Math.min(c.byteLength, want - at);
          buf.set(c.subarray(0, n), at);
          at += n;
        }
        return at;
      },
      close() {},
    });
  }

  private async readBlobAt(digest: string, position: number, buf: Uint8Array): Promise<number> {
    const res = await this.client.request("GET", this.blobKey(digest), {
      headers: { range: `bytes=${position}-${position + buf.byteLength - 1}` },
      accept: [416],
    });
    if (res.status === 404 || res.status === 416) {
      await res.body?.cancel();
      return 0;
    }
    let at = 0;
    for await (const c of res.body ?? ReadableStream.from([])) {
      const n = Math.min(c.byteLength, buf.byteLength - at);
      buf.set(c.subarray(0, n), at);
      at += n;
    }
    return at;
  }

  async commitUpload(uuid: string, digest: string, size: number): Promise<void> {
    const dst = this.blobKey(digest);
    const n = Math.ceil(size / this.P);
    if (await this.holds(digest, size)) {
      // already stored (another namespace pushed it): nothing to assemble
    } else if (n > 0 && !(await this.partsAsSeen(uuid, n))) {
      throw new ConcurrentUploadError(
        `upload ${uuid}: its parts were written by another process meanwhile`,
      );
    } else if (n === 0) {
      await this.client.put(dst, new Uint8Array(0));
    } else if (n === 1 && (await this.client.head(this.partKey(uuid, 0)))?.size === size) {
      await this.client.copy(this.partKey(uuid, 0), dst);
    } else {
      await this.assemble(uuid, dst, n, (k) => ({
        src: this.partKey(uuid, k),
        end: Math.min(this.P, size - k * this.P) - 1,
      }));
    }
    this.seen.delete(uuid);
    if (committed.size >= COMMITTED_KEPT) committed.delete(committed.keys().next().value!);
    committed.set(uuid, digest);
    await this.deleteUpload(uuid);
  }

  /** Parts 0..n-1 of `uuid` are all stored and hold what this process saw (see `seen`). */
  private async partsAsSeen(uuid: string, n: number): Promise<boolean> {
    const seen = this.seen.get(uuid);
    if (!seen) return false;
    const dir = this.uploadDir(uuid);
    let ok = 0;
    for await (const o of this.client.list(dir)) {
      const name = o.key.slice(dir.length);
      if (!/^\d{6,}$/.test(name)) continue; // the multipart marker
      const k = Number(name);
      if (k >= n) continue;
      if (seen.get(k) !== o.etag) return false;
      ok++;
    }
    return ok === n;
  }

  /** Builds `dst` from parts already stored, server-side, via a multipart upload. */
  private async assemble(
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

  async deleteUpload(uuid: string): Promise<void> {
    const dir = this.uploadDir(uuid);
    this.seen.delete(uuid);
    const keys: string[] = [];
    for await (const o of this.client.list(dir)) keys.push(o.key);
    if (keys.includes(`${dir}mpu`)) await this.abortRecorded(`${dir}mpu`);
    await Promise.all(keys.map((k) => this.client.delete(k)));
  }

  /** Aborts the multipart upload a marker records (its assembling process died). */
  private async abortRecorded(marker: string): Promise<void> {
    try {
      const res = await this.client.get(marker);
      const m = JSON.parse(await res.text()) as { key: string; uploadId: string };
      await this.client.abortMultipart(m.key, m.uploadId);
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound) && !(e instanceof SyntaxError)) throw e;
    }
  }

  async writeDerived(name: string, body: ReadableStream<Uint8Array>): Promise<number> {
    const key = this.derivedKey(name);
    await this.admit(body);
    // Small files (the common case) are one PUT; larger ones a multipart upload, which S3
    // makes visible only whole, so a reader sees the old file or the new one.
    const tmp = `derived-${crypto.randomUUID()}`;
    let total = 0;
    let buf = takeBuffer(this.P);
    let fill = 0;
    let parts = 0;
    try {
      for await (const chunk of body) {
        let at = 0;
        while (at < chunk.byteLength) {
          const take = Math.min(this.P - fill, chunk.byteLength - at);
          buf.set(chunk.subarray(at, at + take), fill);
          fill += take;
          at += take;
          if (fill === this.P) {
            await this.client.put(this.partKey(tmp, parts++), buf);
            fill = 0;
          }
        }
        total += chunk.byteLength;
      }
      if (parts === 0) {
        await this.client.put(key, buf.slice(0, fill));
        return total;
      }
      if (fill > 0) await this.client.put(this.partKey(tmp, parts++), buf.subarray(0, fill));
      giveBuffer(buf);
      buf = new Uint8Array(0);
      const n = parts;
      await this.assemble(tmp, key, n, (k) => ({
        src: this.partKey(tmp, k),
        end: Math.min(this.P, total - k * this.P) - 1,
      }));
      return total;
    } finally {
      if (buf.byteLength > 0) giveBuffer(buf);
      if (parts > 0) await this.deleteUpload(tmp).catch(() => {});
    }
  }

  async readDerived(
    name: string,
    range?: { start: number; end: number },
  ): Promise<ReadableStream<Uint8Array>> {
    const res = await this.client.get(this.derivedKey(name), range);
    return res.body ?? ReadableStream.from([]);
  }

  async deleteDerived(prefix: string): Promise<void> {
    const key = this.derivedKey(prefix);
    const keys = [key];
    for await (const o of this.client.list(`${key}/`)) keys.push(o.key);
    await Promise.all(keys.map((k) => this.client.delete(k)));
  }

  async *listBlobs(): AsyncGenerator<StoredObject> {
    const base = `${this.prefix}blobs/`;
    for await (const o of this.client.list(base)) {
      const m = /^([a-z0-9]+)\/[0-9a-f]{2}\/([0-9a-f]+)$/.exec(o.key.slice(base.length));
      if (!m) continue;
      yield { name: `${m[1]}:${m[2]}`, size: o.size, mtime: o.lastModified };
    }
  }

  async *listUploads(): AsyncGenerator<StoredObject> {
    const base = `${this.prefix}uploads/`;
    // Keys come sorted, so one session's parts are adjacent.
    let cur: StoredObject | null = null;
    for await (const o of this.client.list(base)) {
      const name = o.key.slice(base.length).split("/")[0];
      if (cur && cur.name !== name) {
        yield cur;
        cur = null;
      }
      cur ??= { name, size: 0, mtime: 0 };
      cur.size += o.size;
      cur.mtime = Math.max(cur.mtime, o.lastModified);
    }
    if (cur) yield cur;
  }

  private quarantineKey(digest: string): string {
    const [alg, hex] = digest.split(":");
    return `${this.prefix}quarantine/${alg}/${hex}`;
  }

  /**
   * A server-side copy to `quarantine/`, then the blob's key goes. Past CopyObject's 5 GiB the
   * copy is not kept (an assembly by ranges would cost a multipart upload for evidence only).
   */
  async quarantine(digest: string): Promise<boolean> {
    const key = this.blobKey(digest);
    const head = await this.client.head(key);
    if (!head) throw new Deno.errors.NotFound(`s3 object ${key}`);
    const kept = head.size <= MAX_COPY_SIZE;
    if (kept) await this.client.copy(key, this.quarantineKey(digest));
    await this.client.delete(key);
    return kept;
  }

  async *listQuarantined(): AsyncGenerator<StoredObject> {
    const base = `${this.prefix}quarantine/`;
    for await (const o of this.client.list(base)) {
      const m = /^([a-z0-9]+)\/([0-9a-f]+)$/.exec(o.key.slice(base.length));
      if (m) yield { name: `${m[1]}:${m[2]}`, size: o.size, mtime: o.lastModified };
    }
  }

  async deleteQuarantined(digest: string): Promise<void> {
    await this.client.delete(this.quarantineKey(digest));
  }
}

/** CopyObject's limit. */
const MAX_COPY_SIZE = 5 * 1024 ** 3;

// Part buffers are reused: V8 frees large ArrayBuffers only under external-memory pressure, so a
// fresh 2×P per PATCH let RSS climb during pushes (the same effect fs_blob_store.ts measured).
const POOL_MAX = 8;
const pool: Uint8Array[] = [];
function takeBuffer(size: number): Uint8Array {
  const i = pool.findIndex((b) => b.byteLength === size);
  if (i >= 0) return pool.splice(i, 1)[0];
  return new Uint8Array(size);
}
function giveBuffer(b: Uint8Array): void {
  if (pool.length < POOL_MAX && b.byteOffset === 0 && b.byteLength === b.buffer.byteLength) {
    pool.push(b);
  }
}
