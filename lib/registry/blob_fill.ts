// Filling the cache with one upstream blob, once, however many clients ask for it at the same
// time. A fill copies the upstream body into an upload file of the blob store as fast as the
// upstream sends it, hashing as it goes; every client that wants the blob (the first one
// included) follows that file as it grows. So a slow or vanished client never slows or stops
// the fill, memory does not grow with the blob or with the number of followers (each holds one
// chunk), and only a blob whose bytes hash to its digest becomes visible: the upload file is
// moved into place and linked to the namespace after the hash matched, or deleted.
import { RegistryError } from "../oci/errors.ts";
import { parseDigest } from "../oci/grammar.ts";
import { Hasher } from "../streams/hasher.ts";
import type { BlobStore, UploadReader } from "../storage/blob_store.ts";
import { TooLargeError } from "../storage/blob_store.ts";
import type { BlobMeta } from "../metadata/mod.ts";
import { log } from "../log.ts";

/** What an upstream answered for the blob: its body and declared length. */
export interface FillSource {
  body: ReadableStream<Uint8Array>;
  /** Content-Length; null when the upstream streamed without one */
  size: number | null;
}

/** Why a fill failed; `permanent` when retrying cannot help (the bytes were wrong). */
export class FillError extends Error {
  constructor(message: string, readonly permanent: boolean) {
    super(message);
  }
}

export interface FillDeps {
  store: BlobStore;
  blobs: BlobMeta;
  maxBlobSize: number | null;
}

/** Followers read the growing file in chunks of this size: the memory one follower holds. */
const FOLLOW_CHUNK = 256 * 1024;

export class BlobFill {
  written = 0;
  size: number | null = null;
  state: "running" | "done" | "failed" = "running";
  error: Error | null = null;
  /** settles when the blob is stored and linked (or the fill failed) */
  readonly settled: Promise<void>;
  private wake!: () => void;
  private changed: Promise<void>;
  private readonly uuid = `fill-${crypto.randomUUID()}`;

  private constructor(
    private readonly deps: FillDeps,
    readonly ns: string,
    readonly digest: string,
    source: FillSource,
  ) {
    this.changed = this.nextChange();
    this.size = source.size;
    this.settled = this.run(source);
    this.settled.catch(() => {}); // observed through `state`/`error` by followers and callers
  }

  /** Starts a fill once its (empty) upload file exists, so followers can open it at once. */
  static async start(
    deps: FillDeps,
    ns: string,
    digest: string,
    source: FillSource,
  ): Promise<BlobFill> {
    const fill = new BlobFill(deps, ns, digest, source);
    await fill.created;
    return fill;
  }

  private created!: Promise<void>;

  private nextChange(): Promise<void> {
    return new Promise<void>((r) => (this.wake = r));
  }

  private notify(): void {
    const wake = this.wake;
    this.changed = this.nextChange();
    wake();
  }

  private async run(source: FillSource): Promise<void> {
    const { store, blobs } = this.deps;
    const d = parseDigest(this.digest)!;
    const hasher = new Hasher(d.algorithm);
    const max = this.deps.maxBlobSize;
    this.created = store.appendUpload(this.uuid, 0, null, { maxBytes: 0, onChunk: () => {} })
      .then(() => {});
    try {
      await this.created;
      if (this.size !== null && max !== null && this.size > max) {
        await source.body.cancel();
        throw new FillError(`upstream blob of ${this.size} bytes exceeds max_blob_size`, true);
      }
      let res;
      try {
        res = await store.appendUpload(this.uuid, 0, source.body, {
          maxBytes: this.size ?? max ?? Number.MAX_SAFE_INTEGER,
          onChunk: (c) => {
            hasher.update(c);
            this.written += c.byteLength;
            this.notify();
          },
        });
      } catch (e) {
        if (e instanceof TooLargeError) {
          throw new FillError("upstream sent more bytes than it declared", true);
        }
        throw e;
      }
      if (res.cut) {
        throw new FillError(`upstream body ended after ${this.written} bytes`, false);
      }
      if (this.size !== null && this.written !== this.size) {
        throw new FillError(`upstream sent ${this.written} of ${this.size} bytes`, false);
      }
      const got = hasher.peek();
      if (got !== this.digest) {
        throw new FillError(`upstream bytes hash to ${got}, not ${this.digest}`, true);
      }
      this.size = this.written;
      const reserved = await blobs.reserve(this.digest, this.size);
      await store.commitUpload(this.uuid, this.digest, this.size);
      await blobs.addLink(
        this.ns,
        this.digest,
        this.size,
        reserved,
        () => store.exists(this.digest),
      );
      this.state = "done";
    } catch (e) {
      this.state = "failed";
      this.error = e instanceof Error ? e : new Error(String(e));
      log.warn("pull-through fill failed", {
        namespace: this.ns,
        digest: this.digest,
        error: this.error.message,
      });
      await store.deleteUpload(this.uuid).catch(() => {});
      throw this.error;
    } finally {
      this.notify();
    }
  }

  /**
   * The blob's bytes [start, end] (inclusive; end null = to the end) as the fill writes them.
   * Falls back to the stored blob when the fill already moved it into place.
   */
  async follow(start = 0, end: number | null = null): Promise<ReadableStream<Uint8Array>> {
    let reader: UploadReader;
    try {
      reader = await this.deps.store.openUpload(this.uuid);
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
      await this.settled.catch(() => {});
      if (this.state !== "done") throw this.failure();
      const size = this.size!;
      const last = end === null ? size - 1 : Math.min(end, size - 1);
      if (last < start) return ReadableStream.from([]);
      return await this.deps.store.read(this.digest, { start, end: last });
    }
    let pos = start;
    let closed = false;
    const close = () => {
      if (!closed) reader.close();
      closed = true;
    };
    return new ReadableStream<Uint8Array>({
      pull: async (ctl) => {
        for (;;) {
          const total = this.state === "done" ? this.size! : null;
          const limit = Math.min(this.written, end === null ? Infinity : end + 1);
          if (pos < limit) {
            const buf = new Uint8Array(Math.min(FOLLOW_CHUNK, limit - pos));
            const n = await reader.readAt(pos, buf);
            if (n === 0) {
              close();
              ctl.error(new Error("cache fill file shorter than written"));
              return;
            }
            pos += n;
            ctl.enqueue(n === buf.byteLength ? buf : buf.subarray(0, n));
            return;
          }
          if (this.state === "failed") {
            close();
            ctl.error(this.failure());
            return;
          }
          if ((total !== null && pos >= total) || (end !== null && pos > end)) {
            close();
            ctl.close();
            return;
          }
          await this.changed;
        }
      },
      cancel: () => close(),
    }, { highWaterMark: 0 });
  }

  /** The fill's failure as a client error (the body may already be partly sent). */
  failure(): RegistryError {
    return new RegistryError(
      "PROVIDER_UNAVAILABLE",
      `upstream fill of ${this.digest} failed: ${this.error?.message ?? "unknown"}`,
      { status: 502 },
    );
  }
}

/** One fill per digest at a time in this process (single flight). */
export class Fills {
  private readonly active = new Map<string, Promise<BlobFill>>();
  constructor(private readonly deps: FillDeps) {}

  /** The fill of `digest` running (or about to) in this process. */
  get(digest: string): Promise<BlobFill> | undefined {
    return this.active.get(digest);
  }

  /**
   * The running fill of `digest`, or a new one fed by `open` (called only when none runs;
   * callers arriving while the upstream has not answered yet share that one request and its
   * failure). A fill leaves the table when it settles, so a failed one is retried afresh.
   */
  begin(ns: string, digest: string, open: () => Promise<FillSource>): Promise<BlobFill> {
    const running = this.active.get(digest);
    if (running) return running;
    const p = open().then((src) => BlobFill.start(this.deps, ns, digest, src));
    this.active.set(digest, p);
    const leave = () => {
      if (this.active.get(digest) === p) this.active.delete(digest);
    };
    p.then((fill) => fill.settled.then(leave, leave), leave);
    return p;
  }

  /** Fills running now (shutdown lets them finish). */
  async running(): Promise<BlobFill[]> {
    const all = await Promise.allSettled([...this.active.values()]);
    return all.flatMap((r) => r.status === "fulfilled" ? [r.value] : []);
  }
}
