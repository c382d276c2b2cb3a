// Upload sessions in the bucket (uploads/<uuid>/<part>, s3_blob_store.ts's head): a PATCH
// rewrites the part its offset falls in and appends whole parts; readers of a growing session
// here see the part being filled; completion assembles the parts into the blob's key.
import {
  type AppendOptions,
  type AppendResult,
  ConcurrentUploadError,
  type StoredObject,
  TooLargeError,
  type UploadReader,
} from "./blob_store.ts";
import { bodyChunks } from "./body_chunks.ts";
import { bareEtag } from "./s3_client.ts";
import { giveBuffer, type S3Layout, takeBuffer } from "./s3_layout.ts";
import { PartEtags } from "./s3_part_etags.ts";

/**
 * What readers of a growing upload in this process (pull-through followers, which always run
 * where their fill writes) need beyond the stored parts: the part being filled, not yet sent,
 * and for an upload just committed, the blob its bytes moved to. Advisory and bounded: a
 * reader in another process reads the stored parts only.
 */
const filling = new Map<string, Map<number, { buf: Uint8Array; fill: number }>>();
const committed = new Map<string, string>();
const COMMITTED_KEPT = 1024;

/** The store's upload sessions. */
export class S3Uploads {
  readonly etags: PartEtags;

  constructor(private readonly s3: S3Layout) {
    this.etags = new PartEtags(s3);
  }

  async appendUpload(
    uuid: string,
    offset: number,
    body: ReadableStream<Uint8Array> | null,
    opts: AppendOptions,
  ): Promise<AppendResult> {
    this.s3.uploadDir(uuid);
    if (!body) return { written: 0, cut: false };
    await this.s3.admit(body);
    const P = this.s3.P;
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
        const etag = await this.s3.readInto(this.s3.partKey(uuid, k), buf.subarray(0, fill));
        // Those bytes are hashed already; they must be the ones that were.
        this.etags.checkSeen(uuid, k, etag);
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
      inFlight = this.s3.client.put(this.s3.partKey(uuid, n), part.subarray(0, length)).then(
        (etag) => (this.etags.see(uuid, n, etag), null),
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

  readUpload(uuid: string, length: number): Promise<ReadableStream<Uint8Array>> {
    this.s3.uploadDir(uuid);
    return Promise.resolve(ReadableStream.from(this.uploadBytes(uuid, length)));
  }

  private async *uploadBytes(uuid: string, length: number): AsyncGenerator<Uint8Array> {
    for (let k = 0; k * this.s3.P < length; k++) {
      const end = Math.min(this.s3.P, length - k * this.s3.P) - 1;
      const res = await this.s3.client.get(this.s3.partKey(uuid, k), { start: 0, end });
      this.etags.see(uuid, k, bareEtag(res.headers.get("etag")));
      let got = 0;
      for await (const c of res.body ?? ReadableStream.from([])) {
        got += c.byteLength;
        yield c;
      }
      if (got !== end + 1) throw new Error(`upload ${uuid} part ${k}: ${got} of ${end + 1} bytes`);
    }
  }

  openUpload(uuid: string): Promise<UploadReader> {
    this.s3.uploadDir(uuid);
    const P = this.s3.P;
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
        const res = await this.s3.client.request("GET", this.s3.partKey(uuid, k), {
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
    const res = await this.s3.client.request("GET", this.s3.blobKey(digest), {
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
    const dst = this.s3.blobKey(digest);
    const n = Math.ceil(size / this.s3.P);
    if (await this.s3.holds(digest, size)) {
      // already stored (another namespace pushed it): nothing to assemble
    } else if (n > 0 && !(await this.etags.partsAsSeen(uuid, n))) {
      throw new ConcurrentUploadError(
        `upload ${uuid}: its parts were written by another process meanwhile`,
      );
    } else if (n === 0) {
      await this.s3.client.put(dst, new Uint8Array(0));
    } else if (n === 1 && (await this.s3.client.head(this.s3.partKey(uuid, 0)))?.size === size) {
      await this.s3.client.copy(this.s3.partKey(uuid, 0), dst);
    } else {
      await this.s3.assemble(uuid, dst, n, (k) => ({
        src: this.s3.partKey(uuid, k),
        end: Math.min(this.s3.P, size - k * this.s3.P) - 1,
      }));
    }
    this.etags.seen.delete(uuid);
    if (committed.size >= COMMITTED_KEPT) committed.delete(committed.keys().next().value!);
    committed.set(uuid, digest);
    await this.deleteUpload(uuid);
  }

  async deleteUpload(uuid: string): Promise<void> {
    const dir = this.s3.uploadDir(uuid);
    this.etags.seen.delete(uuid);
    const keys: string[] = [];
    for await (const o of this.s3.client.list(dir)) keys.push(o.key);
    if (keys.includes(`${dir}mpu`)) await this.abortRecorded(`${dir}mpu`);
    await Promise.all(keys.map((k) => this.s3.client.delete(k)));
  }

  /** Aborts the multipart upload a marker records (its assembling process died). */
  private async abortRecorded(marker: string): Promise<void> {
    try {
      const res = await this.s3.client.get(marker);
      const m = JSON.parse(await res.text()) as { key: string; uploadId: string };
      await this.s3.client.abortMultipart(m.key, m.uploadId);
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound) && !(e instanceof SyntaxError)) throw e;
    }
  }

  async *listUploads(): AsyncGenerator<StoredObject> {
    const base = `${this.s3.prefix}uploads/`;
    // Keys come sorted, so one session's parts are adjacent.
    let cur: StoredObject | null = null;
    for await (const o of this.s3.client.list(base)) {
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
}
