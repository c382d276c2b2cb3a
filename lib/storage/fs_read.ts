// Reading files fast: a blob's bytes (or a range) streamed through a ring of reused, aligned
// buffers for one large read at a time, natively piped otherwise; a stream cut to a length.

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
