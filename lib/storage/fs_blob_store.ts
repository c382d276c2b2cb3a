// Content-addressed blobs on a local filesystem: <root>/blobs/<alg>/<hex[0:2]>/<hex>, upload
// sessions as <root>/uploads/<uuid>. A completed upload is renamed into place, so a blob file
// is either absent or whole.
import { dirname, join } from "node:path";
import { Scavenger } from "../streams/mod.ts";
import { osFault, storeFault } from "./faults.ts";
import type { StoreWatch } from "./watch.ts";
import {
  type AppendOptions,
  type AppendResult,
  assertDerivedName,
  type BlobStore,
  type CommitOptions,
  type StoredObject,
  TooLargeError,
  type UploadReader,
} from "./blob_store.ts";

/** Blob directories remembered as durable: 256 prefixes per algorithm, with room to spare. */
const DURABLE_DIRS_MAX = 4096;

export class FsBlobStore implements BlobStore {
  /**
   * Blob directories whose own entry this process has synced into their parent: placing a blob
   * there needs neither a mkdir nor a second directory sync (one fsync less per blob).
   */
  private readonly durableDirs = new Set<string>();

  /** how errors and /readyz name this store */
  readonly label: string;

  /**
   * `watch`: refuses new bytes below the free-space reserve and hears of faults (a server's
   * store has one; a scratch store or a test's may not).
   */
  constructor(private readonly root: string, private readonly watch: StoreWatch | null = null) {
    this.label = `the blob store (${root})`;
  }

  /**
   * A write's error as the client should see it: a full or failing filesystem becomes 503 with
   * its cause (and is reported to the watch); anything else is passed on as it is.
   */
  private fault(e: unknown): unknown {
    const f = osFault(e);
    if (!f) return e;
    this.watch?.blob.fault(f.kind, `${this.label} is ${f.kind} (${f.why})`);
    return storeFault(f.kind, this.label, f.why);
  }

  /** Refuses new bytes below the reserve (the body, if any, is cancelled: it will not be read). */
  private async admit(body?: ReadableStream<Uint8Array> | null): Promise<void> {
    try {
      await this.watch?.admit();
    } catch (e) {
      await body?.cancel().catch(() => {});
      throw e;
    }
  }

  async init(): Promise<void> {
    await Deno.mkdir(join(this.root, "uploads"), { recursive: true });
    await Deno.mkdir(join(this.root, "blobs"), { recursive: true });
    await Deno.mkdir(join(this.root, "derived"), { recursive: true });
  }

  localScratch(): string {
    return join(this.root, "sandbox");
  }

  localPath(digest: string): string {
    return this.blobPath(digest);
  }

  localDerivedPath(name: string): string {
    return this.derivedPath(name);
  }

  async adoptDerived(name: string, path: string): Promise<number> {
    const dst = this.derivedPath(name);
    await Deno.mkdir(dirname(dst), { recursive: true });
    try {
      await Deno.rename(path, dst);
      return (await Deno.stat(dst)).size;
    } catch {
      // Another filesystem (a scratch folder elsewhere): copied, as any stream is.
      const f = await Deno.open(path, { read: true });
      return await this.writeDerived(name, f.readable);
    }
  }

  private derivedPath(name: string): string {
    assertDerivedName(name);
    return join(this.root, "derived", ...name.split("/"));
  }

  async writeDerived(name: string, body: ReadableStream<Uint8Array>): Promise<number> {
    const dst = this.derivedPath(name);
    await this.admit(body);
    const tmp = this.uploadPath(`derived-${crypto.randomUUID()}`);
    let n = 0;
    try {
      const f = await Deno.open(tmp, { write: true, create: true, truncate: true });
      try {
        for await (const chunk of body) {
          await writeAll(f, chunk);
          n += chunk.byteLength;
        }
        await f.syncData();
      } finally {
        f.close();
      }
      await Deno.mkdir(dirname(dst), { recursive: true });
      await Deno.rename(tmp, dst);
    } catch (e) {
      await Deno.remove(tmp).catch(() => {});
      throw this.fault(e);
    }
    this.watch?.spent(n);
    return n;
  }

  async readDerived(
    name: string,
    range?: { start: number; end: number },
  ): Promise<ReadableStream<Uint8Array>> {
    const f = await Deno.open(this.derivedPath(name), { read: true });
    try {
      if (!range) return f.readable;
      await f.seek(range.start, Deno.SeekMode.Start);
    } catch (e) {
      f.close();
      throw e;
    }
    return limitStream(f.readable, range.end - range.start + 1);
  }

  async deleteDerived(prefix: string): Promise<void> {
    await Deno.remove(this.derivedPath(prefix), { recursive: true }).catch((e) => {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    });
  }

  private blobPath(digest: string): string {
    const [alg, hex] = digest.split(":");
    return join(this.root, "blobs", alg, hex.slice(0, 2), hex);
  }
  private uploadPath(uuid: string): string {
    return join(this.root, "uploads", uuid);
  }

  read(
    digest: string,
    range?: { start: number; end: number },
    size?: number,
  ): Promise<ReadableStream<Uint8Array>> {
    return readFileRange(this.blobPath(digest), range, size);
  }

  readAll(digest: string): Promise<Uint8Array> {
    return Deno.readFile(this.blobPath(digest));
  }

  async exists(digest: string): Promise<boolean> {
    try {
      await Deno.stat(this.blobPath(digest));
      return true;
    } catch {
      return false;
    }
  }

  async put(digest: string, data: Uint8Array): Promise<void> {
    try {
      await this.admit();
    } catch (e) {
      // Bytes already stored are no new bytes (a tag moved to a manifest pushed before).
      const st = await Deno.stat(this.blobPath(digest)).catch(() => null);
      if (st?.size === data.byteLength) return;
      throw e;
    }
    const tmp = this.uploadPath(`put-${crypto.randomUUID()}`);
    try {
      const f = await Deno.open(tmp, { write: true, create: true, truncate: true });
      try {
        await writeAll(f, data);
        await f.syncData();
      } finally {
        f.close();
      }
      await this.place(tmp, this.blobPath(digest));
    } catch (e) {
      await Deno.remove(tmp).catch(() => {});
      throw this.fault(e);
    }
    this.watch?.spent(data.byteLength);
    this.watch?.blob.ok();
  }

  async delete(digest: string): Promise<void> {
    await Deno.remove(this.blobPath(digest)).catch((e) => {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    });
  }

  async appendUpload(
    uuid: string,
    offset: number,
    body: ReadableStream<Uint8Array> | null,
    opts: AppendOptions,
  ): Promise<AppendResult> {
    if (body) await this.admit(body);
    const path = this.uploadPath(uuid);
    let f: Deno.FsFile | null = null;
    let written = 0;
    try {
      // At offset 0 the open truncates: two file operations fewer for every single-request blob.
      f = await Deno.open(path, { write: true, create: true, truncate: offset === 0 });
      const r = await appendTo(f, offset, body, opts, (n) => (written += n));
      // The caller acknowledges the new offset (a KV commit) once this returns: the bytes must
      // outlive a power loss first, or a resumed upload's persisted hash state would vouch for
      // bytes the file no longer holds. docker-registry syncs at the same points.
      if (written > 0) await f.syncData();
      this.watch?.spent(written);
      this.watch?.blob.ok();
      return r;
    } catch (e) {
      if (e instanceof TooLargeError) {
        // What fit stays, as durable as any append's bytes (the caller ends the session).
        if (written > 0) await f!.syncData().catch(() => {});
        throw e;
      }
      // Nothing of a failed append is acknowledged: its bytes go at once (on a full disk they
      // are the room the next writes need), leaving the session at its committed offset.
      if (f) await dropPast(f, path, offset);
      throw this.fault(e);
    } finally {
      f?.close();
    }
  }

  async readUpload(uuid: string, length: number): Promise<ReadableStream<Uint8Array>> {
    const f = await Deno.open(this.uploadPath(uuid), { read: true, create: false });
    return limitStream(f.readable, length);
  }

  async openUpload(uuid: string): Promise<UploadReader> {
    // An open descriptor survives the rename of commitUpload (same inode).
    const f = await Deno.open(this.uploadPath(uuid), { read: true });
    let closed = false;
    return {
      async readAt(position: number, buf: Uint8Array): Promise<number> {
        await f.seek(position, Deno.SeekMode.Start);
        return (await f.read(buf)) ?? 0;
      },
      close() {
        if (!closed) f.close();
        closed = true;
      },
    };
  }

  async commitUpload(
    uuid: string,
    digest: string,
    size: number,
    opts?: CommitOptions,
  ): Promise<void> {
    const src = this.uploadPath(uuid);
    try {
      if (!opts?.synced) {
        const f = await Deno.open(src, { write: true });
        try {
          await f.truncate(size);
          await f.syncData();
        } finally {
          f.close();
        }
      }
      await this.place(src, this.blobPath(digest));
    } catch (e) {
      throw this.fault(e);
    }
  }

  /**
   * Renames a synced file to its blob path and syncs the directories involved, so a blob the
   * metadata commit that follows calls present is still there after a power loss.
   */
  private async place(src: string, dst: string): Promise<void> {
    const dir = dirname(dst);
    if (this.durableDirs.has(dir)) {
      try {
        await Deno.rename(src, dst);
        await syncDir(dir);
        return;
      } catch (e) {
        // Removed since (by hand, or another tool): made again below.
        if (!(e instanceof Deno.errors.NotFound)) throw e;
        this.durableDirs.delete(dir);
      }
    }
    await Deno.mkdir(dir, { recursive: true });
    await Deno.rename(src, dst);
    await syncDir(dir);
    // `dir` may have just been created, here or by another process that has not synced its
    // parent yet: this process syncs the parent once, then knows the entry is durable.
    await syncDir(dirname(dir));
    if (this.durableDirs.size < DURABLE_DIRS_MAX) this.durableDirs.add(dir);
  }

  async deleteUpload(uuid: string): Promise<void> {
    await Deno.remove(this.uploadPath(uuid)).catch(() => {});
  }

  async *listBlobs(): AsyncGenerator<StoredObject> {
    const base = join(this.root, "blobs");
    for (const alg of await dirNames(base)) {
      for (const prefix of await dirNames(join(base, alg))) {
        for (const hex of await dirNames(join(base, alg, prefix))) {
          const st = await Deno.stat(join(base, alg, prefix, hex)).catch(() => null);
          if (!st?.isFile) continue;
          yield { name: `${alg}:${hex}`, size: st.size, mtime: st.mtime?.getTime() ?? 0 };
        }
      }
    }
  }

  async *listUploads(): AsyncGenerator<StoredObject> {
    const base = join(this.root, "uploads");
    for (const name of await dirNames(base)) {
      const st = await Deno.stat(join(base, name)).catch(() => null);
      if (!st?.isFile) continue;
      yield { name, size: st.size, mtime: st.mtime?.getTime() ?? 0 };
    }
  }

  private quarantinePath(digest: string): string {
    const [alg, hex] = digest.split(":");
    return join(this.root, "quarantine", alg, hex);
  }

  /** A rename out of `blobs/` (same filesystem): the bytes stay for an operator to look at. */
  async quarantine(digest: string): Promise<boolean> {
    const src = this.blobPath(digest);
    const dst = this.quarantinePath(digest);
    await Deno.stat(src); // NotFound before any directory is made
    await Deno.mkdir(dirname(dst), { recursive: true });
    await Deno.rename(src, dst);
    // The blob's absence must outlive a power loss like its presence does (`place`).
    await syncDir(dirname(src));
    return true;
  }

  async *listQuarantined(): AsyncGenerator<StoredObject> {
    const base = join(this.root, "quarantine");
    for (const alg of await dirNames(base)) {
      for (const hex of await dirNames(join(base, alg))) {
        const st = await Deno.stat(join(base, alg, hex)).catch(() => null);
        if (!st?.isFile) continue;
        yield { name: `${alg}:${hex}`, size: st.size, mtime: st.mtime?.getTime() ?? 0 };
      }
    }
  }

  async deleteQuarantined(digest: string): Promise<void> {
    await Deno.remove(this.quarantinePath(digest)).catch((e) => {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    });
  }
}

/**
 * Writes `body` at `offset` of the open upload file (truncating anything past `offset` first),
 * reporting each chunk's size to `wrote` as it lands; does not sync.
 */
async function appendTo(
  f: Deno.FsFile,
  offset: number,
  body: ReadableStream<Uint8Array> | null,
  opts: AppendOptions,
  wrote: (n: number) => void,
): Promise<AppendResult> {
  if (offset > 0) {
    // Bytes past the committed offset were never acknowledged (a crash mid-PATCH): drop them.
    await f.truncate(offset);
    await f.seek(offset, Deno.SeekMode.Start);
  }
  if (!body) return { written: 0, cut: false };
  let written = 0;
  const chunks = bodyChunks(body, opts.unsized === true);
  try {
    for (;;) {
      let r: IteratorResult<Uint8Array>;
      try {
        r = await chunks.next();
      } catch {
        return { written, cut: true };
      }
      if (r.done) return { written, cut: false };
      const chunk = r.value;
      if (written + chunk.byteLength > opts.maxBytes) {
        // Keep what fits so a window check (416) can still see a complete prefix.
        const room = opts.maxBytes - written;
        if (room > 0) {
          await writeAll(f, chunk.subarray(0, room));
          opts.onChunk(chunk.subarray(0, room));
          written += room;
          wrote(room);
        }
        throw new TooLargeError(`more than ${opts.maxBytes} bytes`);
      }
      await writeAll(f, chunk);
      opts.onChunk(chunk);
      written += chunk.byteLength;
      wrote(chunk.byteLength);
    }
  } finally {
    await chunks.return(undefined).catch(() => {});
  }
}

/** Removes what a failed append wrote: the file back to `offset`, or gone when that is 0. */
async function dropPast(f: Deno.FsFile, path: string, offset: number): Promise<void> {
  try {
    if (offset > 0) await f.truncate(offset);
    else await Deno.remove(path);
  } catch {
    // the next append truncates to its offset first; scrub removes a file left alone
  }
}

/** Entry names of a directory (empty when it does not exist): read whole so the walk never
 * holds a directory handle across awaits of the caller. */
async function dirNames(dir: string): Promise<string[]> {
  const out: string[] = [];
  try {
    for await (const e of Deno.readDir(dir)) out.push(e.name);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  return out;
}

// 2 MiB: a 256 MiB pull to curl, alternating builds on an idle machine (2026-11-27), medians of
// 5: 1 MiB 1720/1731 MB/s, 2 MiB 2205/2259, 4 MiB 1855/1936 (the ring is 4 of them: +4 MiB RSS
// for the one stream that has it, MAX_BYTE_STREAMS).
const READ_CHUNK = 2 << 20;
// Measured here (256 MiB file to curl): a JS stream with 1 MiB reads does ~2 GB/s for one client;
// FsFile.readable is piped natively at ~650 MB/s for one client, ~1.2 GB/s summed over 8. With a
// fresh buffer per chunk the JS stream cost +80 MiB RSS; reading into a ring of 3 reused buffers
// keeps a 256 MiB pull at +35 MiB and lifted the bench's single pull from ~1.0 to 1.4-2.7 GB/s.
// Giving every concurrent pull the JS stream measured slower (550-880 vs 860-1270 MB/s over 8),
// so one pull at a time gets it and concurrent pulls share the native pipe.
const MAX_BYTE_STREAMS = 1;
// The ring is allocated per stream and V8 frees its 4 MiB only under external-memory pressure, so
// handing it to each small blob in turn (bench: 64 × 4 MiB, 8 in flight) added ~75 MiB of RSS
// against ~11 MiB with the native pipe alone, at the same MB/s. Only a blob large enough for the
// ring's speed to matter gets it.
const RING_MIN_LENGTH = 32 << 20;
// Why a ring of 4 is safe: Deno.serve hands each enqueued chunk to hyper zero-copy through a
// channel that accepts the next chunk only once < 64 KiB of the previous one is left, and hyper
// queues well under 1 MiB, so when chunk k+2 is pulled nothing of chunk k-1 is still referenced
// (a ring of 2 corrupted bodies in tests/api/blob_pull_integrity_test.ts; 3 never did; 4 is
// margin). The TLS bridge writes one chunk and awaits 'drain' before pulling the next.
const RING = 4;
let activeByteStreams = 0;
const BODY_BUFFER = 256 * 1024;

/**
 * Yields a request body's chunks. Deno's request bodies are byte streams, so a BYOB reader
 * refills one buffer instead of allocating a fresh ArrayBuffer per chunk; V8 frees those only
 * under external-memory pressure, which let RSS climb by ~80 MiB during pushes. Each chunk is
 * valid only until the next one is requested.
 */
export async function* bodyChunks(
  body: ReadableStream<Uint8Array>,
  unsized: boolean,
): AsyncGenerator<Uint8Array> {
  let reader: ReadableStreamBYOBReader | null = null;
  try {
    if (!unsized) reader = body.getReader({ mode: "byob" });
  } catch {
    // not a byte stream: fall back to its own chunks
  }
  if (!reader) {
    const r = body.getReader();
    const scavenger = new Scavenger();
    try {
      for (;;) {
        const x = await r.read();
        if (x.done) return;
        scavenger.passed(x.value.length);
        yield x.value;
      }
    } finally {
      r.releaseLock();
      body.cancel().catch(() => {});
    }
  }
  let buf = new ArrayBuffer(BODY_BUFFER);
  try {
    for (;;) {
      const x = await reader.read(new Uint8Array(buf));
      if (x.done) return;
      yield x.value;
      buf = x.value.buffer as ArrayBuffer;
    }
  } finally {
    reader.releaseLock();
    body.cancel().catch(() => {});
  }
}

/**
 * Streams up to `length` bytes of `f` from its current position and closes it. Reads go into a
 * ring of RING buffers owned by this stream instead of a fresh ArrayBuffer per chunk (which V8
 * frees only under external-memory pressure). With highWaterMark 0, `pull` runs only when the
 * consumer asks for the next chunk, i.e. after it has taken the previous one; a buffer is reused
 * RING pulls after it was handed out (see RING for why that is long enough).
 */
function fileStream(f: Deno.FsFile, length: number, position: number): ReadableStream<Uint8Array> {
  let left = length;
  let closed = false;
  activeByteStreams++;
  const ring = allocRing(position);
  let turn = 0;
  const close = () => {
    if (!closed) {
      f.close();
      activeByteStreams--;
    }
    closed = true;
  };
  return new ReadableStream<Uint8Array>({
    async pull(ctl) {
      const buf = ring[turn];
      turn = (turn + 1) % RING;
      const want = Math.min(buf.byteLength, left);
      const n = want > 0 ? await f.read(buf.subarray(0, want)) : null;
      if (n === null) {
        close();
        ctl.close();
        return;
      }
      left -= n;
      ctl.enqueue(buf.subarray(0, n));
    },
    cancel() {
      close();
    },
  }, { highWaterMark: 0 });
}

async function syncDir(path: string): Promise<void> {
  const d = await Deno.open(path, { read: true });
  try {
    await d.sync();
  } finally {
    d.close();
  }
}

// The kernel copies page cache into a read buffer with `rep movsb`, which ran at half speed here
// when the buffer sat 16 bytes past a 64-byte boundary, as glibc places a large calloc (the ring
// of a fresh process): curl pulls of a 256 MiB blob at 1.2-1.6 GB/s with such a ring against
// 2.1-3.8 GB/s with the same ring aligned. It was also the slow first 4 large GETs after start
// (later rings, allocated once V8 had freed earlier ones, landed elsewhere); aligned rings are
// fast from the first GET. JS cannot ask for alignment, so
// the ring is over-allocated and its start is chosen from its address, read with
// Deno.UnsafePointer (no foreign call, but it needs --allow-ffi, which `deno task start` grants;
// without it the ring is used as allocated: correct, slower).
const FFI = Deno.permissions.querySync?.({ name: "ffi" }).state === "granted";
const PAGE = 4096;

/**
 * RING buffers of READ_CHUNK bytes, each starting on a page boundary plus the file position's
 * offset within a cache line, so every read's source and destination are equally aligned.
 */
export function allocRing(position: number): Uint8Array[] {
  const raw = new Uint8Array(RING * READ_CHUNK + 2 * PAGE);
  let start = 0;
  if (FFI) {
    const addr = Number(
      BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(raw))) % BigInt(PAGE),
    );
    start = (PAGE - addr) % PAGE + (position % 64);
  }
  return Array.from(
    { length: RING },
    (_, i) => raw.subarray(start + i * READ_CHUNK, start + (i + 1) * READ_CHUNK),
  );
}

/**
 * [start, end] (inclusive) of the file at `path`, or all of it, as a blob read streams it (the
 * ring reader for large reads). A sandboxed index walk reads its layer's file with this too.
 */
export async function readFileRange(
  path: string,
  range?: { start: number; end: number },
  /** the file's size when the caller knows it (no stat) */
  size?: number,
): Promise<ReadableStream<Uint8Array>> {
  const f = await Deno.open(path, { read: true });
  let length: number;
  try {
    if (range) await f.seek(range.start, Deno.SeekMode.Start);
    length = range ? range.end - range.start + 1 : size ?? (await f.stat()).size;
  } catch (e) {
    f.close();
    throw e;
  }
  if (length < RING_MIN_LENGTH || activeByteStreams >= MAX_BYTE_STREAMS) {
    return range ? limitStream(f.readable, length) : f.readable;
  }
  return fileStream(f, length, range?.start ?? 0);
}

async function writeAll(f: Deno.FsFile, data: Uint8Array): Promise<void> {
  let off = 0;
  while (off < data.byteLength) off += await f.write(data.subarray(off));
}

/** Passes the first `n` bytes of `src` and closes it. */
export function limitStream(
  src: ReadableStream<Uint8Array>,
  n: number,
): ReadableStream<Uint8Array> {
  const reader = src.getReader();
  let left = n;
  return new ReadableStream<Uint8Array>({
    async pull(ctl) {
      if (left <= 0) {
        ctl.close();
        await reader.cancel();
        return;
      }
      const r = await reader.read();
      if (r.done) {
        ctl.close();
        return;
      }
      const chunk = r.value.byteLength > left ? r.value.subarray(0, left) : r.value;
      left -= chunk.byteLength;
      ctl.enqueue(chunk);
      if (left <= 0) {
        ctl.close();
        await reader.cancel();
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
}
