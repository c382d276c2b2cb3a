// Filling the cache with one upstream blob, once, however many clients ask for it at the same
// time. A fill reads the upstream body as fast as the upstream sends it, hashing each chunk, and
// keeps the newest chunks in memory while a writer copies them into an upload file of the blob
// store; every client that wants the blob (the first one included) follows the fill: from memory
// while it keeps up, from the file when it falls behind. So the first client gets the bytes at
// the upstream's pace instead of the disk's (awaiting each file write before passing a chunk on
// ran cold pulls at 0.16-0.27× a direct pull), a slow or vanished client never slows or stops the
// fill, memory stays bounded per fill (a window of chunks) and per follower (a ring of read
// buffers), and only a blob whose bytes hash to its digest becomes visible: the upload file is
// moved into place and linked to the namespace after the hash matched, or deleted. A follower's
// stream ends only once the whole body hashed to the digest, so a client never sees a clean end
// of wrong bytes.
import { parseDigest, type RegistryError, upstreamFailed } from "../oci/mod.ts";
import { Hasher } from "../streams/mod.ts";
import type { BlobStore, UploadReader } from "../storage/mod.ts";
import { type BlobMeta, NO_FACTS, type UsageLedger } from "../metadata/mod.ts";
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
  /** quotas: the linking commit is admitted by the ledger with the blob's size */
  usage?: UsageLedger;
}

/** Bytes received but not yet written the reader may hold before it waits for the writer. */
const MAX_UNWRITTEN = 8 << 20;
/** Written bytes kept in memory anyway, so a follower a little behind still reads no file. */
const KEEP_WRITTEN = 2 << 20;
/** The writer copies pending chunks into buffers of this size: fewer, larger file writes. */
const WRITE_BLOCK = 1 << 20;
/** What one fill may hold in memory, give or take two upstream chunks (tests check it). */
export const FILL_MEMORY_BOUND = MAX_UNWRITTEN + KEEP_WRITTEN;
/** A follower behind the memory window reads the file in chunks of this size... */
const FOLLOW_CHUNK = 256 * 1024;
/** ...into a ring of this many buffers: Deno.serve releases a chunk before the one after next
 * is pulled (see RING in lib/storage/fs_read.ts), so a fresh ArrayBuffer per read, which V8 frees
 * late, is not needed. */
const FOLLOW_RING = 4;

interface Chunk {
  /** offset of the chunk's first byte in the blob */
  at: number;
  bytes: Uint8Array;
}

export class BlobFill {
  /** bytes received from the upstream and hashed */
  received = 0;
  /** bytes the writer has written to the upload file */
  written = 0;
  size: number | null = null;
  /** running → verified (every byte hashed to the digest) → done (stored and linked) */
  state: "running" | "verified" | "done" | "failed" = "running";
  error: Error | null = null;
  /** settles when the blob is stored and linked (or the fill failed) */
  readonly settled: Promise<void>;
  private wake!: () => void;
  private changed: Promise<void>;
  private readonly uuid = `fill-${crypto.randomUUID()}`;
  /** received chunks still in memory, in order; window[0].at is the lowest offset held */
  private window: Chunk[] = [];
  /** index into `window` of the first chunk the writer has not taken */
  private unwritten = 0;
  private inputDone = false;
  private aborted = false;
  private writeError: Error | null = null;

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

  /**
   * Starts a fill. Its upload file is created by the writer's first append, not before: no
   * follower needs it until it falls behind the memory window, which holds only bytes already
   * written (issue 25: one file operation less per blob, and no wait before the first byte).
   */
  static start(deps: FillDeps, ns: string, digest: string, source: FillSource): BlobFill {
    return new BlobFill(deps, ns, digest, source);
  }

  private nextChange(): Promise<void> {
    return new Promise<void>((r) => (this.wake = r));
  }

  private notify(): void {
    const wake = this.wake;
    this.changed = this.nextChange();
    wake();
  }

  /** Bytes of this fill held in memory now (see FILL_MEMORY_BOUND). */
  get inMemory(): number {
    return this.received - this.windowStart;
  }

  /** Lowest blob offset still in memory (every byte below it is in the file). */
  private get windowStart(): number {
    return this.window.length > 0 ? this.window[0].at : this.received;
  }

  private async run(source: FillSource): Promise<void> {
    const { store, blobs } = this.deps;
    const d = parseDigest(this.digest)!;
    const hasher = new Hasher(d.algorithm);
    const max = this.deps.maxBlobSize;
    const reader = source.body.getReader();
    let writer: Promise<unknown> | null = null;
    try {
      if (this.size !== null && max !== null && this.size > max) {
        throw new FillError(`upstream blob of ${this.size} bytes exceeds max_blob_size`, true);
      }
      writer = store.appendUpload(this.uuid, 0, this.writerStream(), {
        maxBytes: Number.MAX_SAFE_INTEGER,
        onChunk: (c) => this.wrote(c.byteLength),
      }).catch((e) => {
        this.writeError = e instanceof Error ? e : new Error(String(e));
        this.notify();
      });
      const limit = this.size ?? max ?? Number.MAX_SAFE_INTEGER;
      for (;;) {
        while (this.received - this.written > MAX_UNWRITTEN && !this.writeError) {
          await this.changed;
        }
        if (this.writeError) throw this.writeError;
        let r: ReadableStreamReadResult<Uint8Array>;
        try {
          r = await reader.read();
        } catch (e) {
          throw new FillError(
            `upstream body broke after ${this.received} bytes: ${(e as Error)?.message ?? e}`,
            false,
          );
        }
        if (r.done) break;
        const bytes = r.value;
        if (this.received + bytes.byteLength > limit) {
          throw new FillError(
            this.size !== null
              ? "upstream sent more bytes than it declared"
              : "upstream blob exceeds max_blob_size",
            true,
          );
        }
        if (bytes.byteLength === 0) continue;
        hasher.update(bytes);
        this.window.push({ at: this.received, bytes });
        this.received += bytes.byteLength;
        this.notify();
      }
      if (this.size !== null && this.received !== this.size) {
        throw new FillError(`upstream sent ${this.received} of ${this.size} bytes`, false);
      }
      const got = hasher.peek();
      if (got !== this.digest) {
        throw new FillError(`upstream bytes hash to ${got}, not ${this.digest}`, true);
      }
      this.size = this.received;
      this.state = "verified";
      this.inputDone = true;
      this.notify();
      await writer;
      if (this.writeError) throw this.writeError;
      if (this.written !== this.size) {
        throw new Error(`cache fill wrote ${this.written} of ${this.size} bytes`);
      }
      const reserved = await blobs.reserve(this.digest, this.size);
      // Written from offset 0 by the one append above, under this fill's own uuid, and synced.
      await store.commitUpload(this.uuid, this.digest, this.size, { synced: true });
      const size = this.size;
      const link = () =>
        blobs.addLink(
          this.ns,
          this.digest,
          size,
          reserved,
          () => store.exists(this.digest),
          NO_FACTS,
        );
      await (this.deps.usage ? this.deps.usage.admit(this.ns, this.digest, size, link) : link());
      this.state = "done";
      this.window = [];
      this.unwritten = 0;
    } catch (e) {
      this.state = "failed";
      this.error = e instanceof Error ? e : new Error(String(e));
      log.warn("pull-through fill failed", {
        namespace: this.ns,
        digest: this.digest,
        error: this.error.message,
      });
      reader.cancel().catch(() => {});
      this.aborted = true;
      this.window = [];
      this.unwritten = 0;
      this.notify();
      await writer;
      await store.deleteUpload(this.uuid).catch(() => {});
      throw this.error;
    } finally {
      this.notify();
    }
  }

  /** The writer took `n` more bytes into the file: drop chunks no follower needs in memory. */
  private wrote(n: number): void {
    this.written += n;
    let drop = 0;
    while (
      drop < this.unwritten &&
      this.received - (this.window[drop].at + this.window[drop].bytes.byteLength) >= KEEP_WRITTEN
    ) drop++;
    if (drop > 0) {
      this.window.splice(0, drop);
      this.unwritten -= drop;
    }
    this.notify();
  }

  /**
   * The chunks the writer has not taken, as a stream appendUpload consumes: several small chunks
   * go out copied into one block. appendUpload writes a chunk before it pulls the next
   * (highWaterMark 0), so two blocks taking turns are never overwritten mid-write.
   */
  private writerStream(): ReadableStream<Uint8Array> {
    // Sized to the blob when it is smaller: two zeroed 1 MiB blocks cost a 200 KiB layer more
    // CPU (memset, page faults) than writing it. Allocated on first use.
    const size = Math.max(1, Math.min(WRITE_BLOCK, this.size ?? WRITE_BLOCK));
    let blocks: Uint8Array[] | null = null;
    let turn = 0;
    return new ReadableStream<Uint8Array>({
      pull: async (ctl) => {
        for (;;) {
          if (this.aborted) return ctl.error(new Error("cache fill aborted"));
          const pending = this.window.length - this.unwritten;
          if (
            pending === 1 ||
            (pending > 1 && this.window[this.unwritten].bytes.byteLength >= size)
          ) {
            ctl.enqueue(this.window[this.unwritten++].bytes);
            return;
          }
          if (pending > 1) {
            blocks ??= [new Uint8Array(size), new Uint8Array(size)];
            const block = blocks[turn];
            turn = 1 - turn;
            let n = 0;
            while (this.unwritten < this.window.length) {
              const b = this.window[this.unwritten].bytes;
              if (n + b.byteLength > size) break;
              block.set(b, n);
              n += b.byteLength;
              this.unwritten++;
            }
            ctl.enqueue(block.subarray(0, n));
            return;
          }
          if (this.inputDone) return ctl.close();
          await this.changed;
        }
      },
    }, { highWaterMark: 0 });
  }

  /** The in-memory bytes from `pos` up to `limit` (exclusive), one chunk's worth. */
  private fromMemory(pos: number, limit: number): Uint8Array {
    const w = this.window;
    let lo = 0;
    let hi = w.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (w[mid].at <= pos) lo = mid;
      else hi = mid - 1;
    }
    const c = w[lo];
    const from = pos - c.at;
    return c.bytes.subarray(from, Math.min(c.bytes.byteLength, limit - c.at));
  }

  /**
   * The blob's bytes [start, end] (inclusive; end null = to the end) as the fill receives them.
   * Falls back to the stored blob when the fill already moved it into place.
   */
  async follow(start = 0, end: number | null = null): Promise<ReadableStream<Uint8Array>> {
    if (this.state === "done") return await this.stored(start, end);
    let pos = start;
    let closed = false;
    // The upload file, opened only when this follower falls behind the memory window.
    let reader: UploadReader | null = null;
    // The stored blob, once the fill moved the upload file into place before it was opened.
    let placed: ReadableStreamDefaultReader<Uint8Array> | null = null;
    let ring: Uint8Array[] | null = null;
    let turn = 0;
    const close = () => {
      if (!closed) {
        reader?.close();
        placed?.cancel().catch(() => {});
      }
      closed = true;
    };
    return new ReadableStream<Uint8Array>({
      pull: async (ctl) => {
        for (;;) {
          if (placed) {
            const r = await placed.read();
            if (r.done) {
              closed = true;
              ctl.close();
            } else ctl.enqueue(r.value);
            return;
          }
          if (this.state === "failed") {
            close();
            ctl.error(this.failure());
            return;
          }
          const complete = this.state === "verified" || this.state === "done";
          const limit = Math.min(this.received, end === null ? Infinity : end + 1);
          if (pos < limit) {
            if (pos >= this.windowStart) {
              const piece = this.fromMemory(pos, limit);
              pos += piece.byteLength;
              ctl.enqueue(piece);
              return;
            }
            // Behind the window: those bytes are in the file, or already in place.
            if (!reader) {
              const opened = await this.openFile();
              if (opened === "placed") {
                placed = (await this.stored(pos, end)).getReader();
                continue;
              }
              if (opened === "failed") continue;
              reader = opened;
            }
            ring ??= Array.from({ length: FOLLOW_RING }, () => new Uint8Array(FOLLOW_CHUNK));
            const buf = ring[turn];
            turn = (turn + 1) % FOLLOW_RING;
            const want = Math.min(FOLLOW_CHUNK, Math.min(limit, this.windowStart) - pos);
            const n = await reader.readAt(pos, buf.subarray(0, want));
            if (n === 0) {
              close();
              ctl.error(new Error("cache fill file shorter than written"));
              return;
            }
            pos += n;
            ctl.enqueue(buf.subarray(0, n));
            return;
          }
          if ((complete && pos >= this.size!) || (end !== null && pos > end)) {
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

  /** The upload file, or where it went: "placed" once stored, "failed" once the fill failed. */
  private async openFile(): Promise<UploadReader | "placed" | "failed"> {
    if (this.state === "done") return "placed";
    try {
      return await this.deps.store.openUpload(this.uuid);
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
      // settled: the fill either moved the file into place or deleted it
      return await this.settled.then(() => "placed" as const, () => "failed" as const);
    }
  }

  /** Bytes [start, end] of the stored blob (after the fill is done). */
  private async stored(start: number, end: number | null): Promise<ReadableStream<Uint8Array>> {
    const last = end === null ? this.size! - 1 : Math.min(end, this.size! - 1);
    if (last < start) return ReadableStream.from([]);
    return await this.deps.store.read(this.digest, { start, end: last });
  }

  /** The fill's failure as a client error (the body may already be partly sent). */
  failure(): RegistryError {
    return upstreamFailed(
      `upstream fill of ${this.digest} failed: ${this.error?.message ?? "unknown"}`,
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
