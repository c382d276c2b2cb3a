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
// of wrong bytes. Should the store refuse the bytes mid-fill (full, failing), the fill goes on
// uncached for the clients following it within the memory window (their pace then holds the
// upstream back; the store drops a failed append's bytes, so one further behind is cut off), and
// leaves the table: the blob is not stored, its `cache` job retries later.
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
  /** LAG_GRACE_MS, shorter in tests */
  lagGraceMs?: number;
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
/** An uncached fill waits this long for a follower that stopped reading (more than MAX_UNWRITTEN
 * behind, or the last one left), then cuts it off (its client retries) so the others go on. */
const LAG_GRACE_MS = 10_000;

/** Where one follower is, so an uncached fill keeps what it still needs and keeps to its pace. */
interface Cursor {
  pos: number;
  movedAt: number;
  /** why an uncached fill left this follower behind (its stream errors), or null */
  cut: string | null;
}

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
  /** settles when the blob is stored and linked; rejects when it failed or went on uncached */
  readonly settled: Promise<void>;
  private settle!: { resolve: () => void; reject: (e: Error) => void };
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
  /** the store refused the bytes: followers are served from memory (and the file so far) only */
  private uncached = false;
  private readonly cursors = new Set<Cursor>();

  private constructor(
    private readonly deps: FillDeps,
    readonly ns: string,
    readonly digest: string,
    source: FillSource,
  ) {
    this.changed = this.nextChange();
    this.size = source.size;
    this.settled = new Promise<void>((resolve, reject) => (this.settle = { resolve, reject }));
    this.settled.catch(() => {}); // observed through `state`/`error` by followers and callers
    // Settled at most once: an uncached fill rejects `settled` early and goes on.
    this.run(source).then(() => this.settle.resolve(), (e) => this.settle.reject(e));
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
        await this.roomToRead();
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
        if (this.uncached) this.trimPassed();
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
      if (this.writeError && !this.uncached && !this.goUncached()) throw this.writeError;
      if (this.uncached) {
        // Every byte hashed; the followers finish from memory, then the (emptied) file goes.
        while (this.cursors.size > 0) await this.awaitFollower(this.slowest()!);
        this.window = [];
        await store.deleteUpload(this.uuid).catch(() => {});
        return;
      }
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

  /**
   * Waits until the fill may read on: the writer within MAX_UNWRITTEN, or (uncached) the slowest
   * follower within it, cutting one off that has not moved for LAG_GRACE_MS. Throws when the
   * store refused the bytes and no client follows the fill (nothing is left to do).
   */
  private async roomToRead(): Promise<void> {
    for (;;) {
      if (this.writeError && !this.uncached && !this.goUncached()) throw this.writeError;
      if (!this.uncached) {
        if (this.received - this.written <= MAX_UNWRITTEN) return;
        await this.changed;
        continue;
      }
      const slowest = this.slowest();
      if (!slowest) throw this.error!; // every client went: nobody to pass the bytes to
      if (this.received - slowest.pos <= MAX_UNWRITTEN) return;
      await this.awaitFollower(slowest);
    }
  }

  /** The follower furthest behind, or null when none is left. */
  private slowest(): Cursor | null {
    let slowest: Cursor | null = null;
    for (const c of this.cursors) if (!slowest || c.pos < slowest.pos) slowest = c;
    return slowest;
  }

  /**
   * Uncached: waits for a change (a follower moved or left), cutting `c` off once it has not
   * moved for LAG_GRACE_MS (a client that stopped reading would hold the others, and the bytes
   * kept for it, for as long as its connection stays open).
   */
  private async awaitFollower(c: Cursor): Promise<void> {
    const wait = c.movedAt + (this.deps.lagGraceMs ?? LAG_GRACE_MS) - Date.now();
    if (wait <= 0) {
      c.cut = `stopped reading for ${this.deps.lagGraceMs ?? LAG_GRACE_MS} ms while the ` +
        `uncached fill of ${this.digest} waited on it`;
      this.cursors.delete(c);
      this.trimPassed();
      this.notify();
      return;
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([this.changed, new Promise<void>((r) => (timer = setTimeout(r, wait)))]);
    clearTimeout(timer);
  }

  /**
   * The store refused the fill's bytes: go on uncached for the clients following it (false when
   * none does). `settled` rejects now, so the fill leaves the table and its job retries later.
   */
  private goUncached(): boolean {
    // A failed append's bytes are dropped from the file (lib/storage): a follower behind the
    // memory window has nowhere left to read from.
    for (const c of this.cursors) {
      if (c.pos >= this.windowStart) continue;
      c.cut = `the blob store refused the fill of ${this.digest} (${this.writeError?.message}) ` +
        `and dropped the bytes this client had yet to read`;
      this.cursors.delete(c);
    }
    this.notify();
    if (this.cursors.size === 0) return false;
    this.uncached = true;
    this.error = this.writeError;
    log.warn("pull-through fill goes on uncached: the blob store refused its bytes", {
      namespace: this.ns,
      digest: this.digest,
      followers: this.cursors.size,
      error: this.error?.message,
    });
    this.settle.reject(this.error!);
    this.trimPassed();
    return true;
  }

  /** Uncached: drop the chunks every follower is past (nothing else will read them). */
  private trimPassed(): void {
    let floor = Infinity;
    for (const c of this.cursors) floor = Math.min(floor, c.pos);
    let drop = 0;
    while (
      drop < this.window.length &&
      this.window[drop].at + this.window[drop].bytes.byteLength <= floor
    ) drop++;
    if (drop > 0) {
      this.window.splice(0, drop);
      this.unwritten = Math.max(0, this.unwritten - drop);
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
    const cursor: Cursor = { pos, movedAt: Date.now(), cut: null };
    this.cursors.add(cursor);
    const advance = (n: number) => {
      pos += n;
      cursor.pos = pos;
      cursor.movedAt = Date.now();
      if (this.uncached) {
        this.trimPassed();
        this.notify();
      }
    };
    const leave = () => {
      if (this.cursors.delete(cursor) && this.uncached) {
        this.trimPassed();
        this.notify();
      }
    };
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
      leave();
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
          if (cursor.cut !== null) {
            close();
            ctl.error(upstreamFailed(cursor.cut));
            return;
          }
          const complete = this.state === "verified" || this.state === "done";
          const limit = Math.min(this.received, end === null ? Infinity : end + 1);
          if (pos < limit) {
            if (pos >= this.windowStart) {
              const piece = this.fromMemory(pos, limit);
              advance(piece.byteLength);
              ctl.enqueue(piece);
              return;
            }
            // Behind the window: those bytes are in the file, or already in place.
            if (!reader) {
              const opened = await this.openFile();
              if (opened === "placed") {
                placed = (await this.stored(pos, end)).getReader();
                leave();
                continue;
              }
              if (opened === "failed" && this.uncached) {
                close();
                ctl.error(this.failure());
                return;
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
            advance(n);
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
