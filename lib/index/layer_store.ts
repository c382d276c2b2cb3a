// Where a layer's index lives and how its files are read back. The KV record is a small
// pointer (values stay far below 64 KiB whatever the layer holds); the listing, the gzip
// checkpoints and the zstd side copy are derived files in the blob store, in one of two slots,
// so a re-index never changes files a reader of the current record is using.
import type { BlobStore } from "../storage/mod.ts";
import { RegistryError, tooManyRequests } from "../oci/mod.ts";
import { K } from "../kv/mod.ts";
import { type CheckpointRef, decodeTable, following, nearest } from "./checkpoint_table.ts";
import { compressedRange, inflateFrom } from "./gzip_read.ts";
import { decodeFrames, decompressFrame, type Frame, frameAt } from "./zstd_frames.ts";
import { unsealTable } from "./table_seal.ts";
import { countIntegrityFailure } from "../storage/mod.ts";
import { log } from "../log.ts";

/**
 * Bumped when the listing's content changes: older listings are served `refreshing`. 2: gzip
 * checkpoints at unaligned block boundaries too (a version 1 table still reads, its checkpoints
 * all aligned, but may have none for GiBs: re-indexing bounds its reads). 3: checkpoints inside
 * fixed-Huffman blocks too (a version 2 table still reads, but a read inside one of zlib-ng's
 * long level-1 blocks inflates it from its start until the layer is re-indexed).
 */
export const INDEX_VERSION = 3;

export type Compression = "gzip" | "zstd" | "none";

export interface IndexRecord {
  /** the listing's version; 0 for an `unavailable` record, which holds no listing of any */
  version: number;
  /**
   * ready; partial (a truncated or corrupt archive: what was read); unsupported (a verdict on
   * the bytes, final); unavailable (the machine failed, not the layer: no verdict, retried;
   * machine_failure.ts)
   */
  state: "ready" | "partial" | "unsupported" | "unavailable";
  compression: Compression | null;
  uncompressedSize: number;
  entries: number;
  /** why the listing is partial, the verdict, or what kept the walk from running */
  error?: string;
  /** when the walk ended (or, `unavailable`, when it last failed to run) */
  indexedAt: number;
  /** stored size of listing.json.gz; absent for a listing indexed before it was written */
  documentSize?: number;
  /** derived-file prefix of this run */
  base: string;
  /** `unavailable`: how often a heal pass queued the layer again (machine_failure.ts) */
  heals?: number;
}

/** Whether the record points at a listing (ready or partial) that can be read. */
export function listed(rec: IndexRecord): boolean {
  return rec.state === "ready" || rec.state === "partial";
}

export const indexKey = (digest: string): Deno.KvKey => K.layerIndex(digest);

/**
 * Where a new indexing run writes: the one of two slots the current record does not use. A run
 * killed half-way leaves files only in that slot, and the next run clears the slot first, so
 * nothing is orphaned and a layer never has more than two runs on disk.
 */
export function runBase(digest: string, current: string | undefined): string {
  const [alg, hex] = digest.split(":");
  const dir = `index/${alg}/${hex}`;
  return current === `${dir}/a` ? `${dir}/b` : `${dir}/a`;
}

export const files = {
  listing: (base: string) => `${base}/listing.ndjson`,
  /** the entries endpoint's JSON document, gzipped (listing_document.ts) */
  listingDocument: (base: string) => `${base}/listing.json.gz`,
  checkpoints: (base: string) => `${base}/checkpoints.bin`,
  /** the 32 KiB windows of the checkpoints, in table order */
  windows: (base: string) => `${base}/windows.bin`,
  frames: (base: string) => `${base}/frames.zst`,
  frameTable: (base: string) => `${base}/frames.bin`,
};

/** A listing entry as the API shows it (SPEC §Layer listing). */
export interface ListedEntry {
  path: string;
  kind: string;
  size: number;
  mode: number;
  uid: number;
  gid: number;
  mtime: number;
  offset: number;
  link_target?: string;
  capabilities?: string[];
  content?: {
    sha256: string;
    sha512: string;
    mime_type: string;
    secrets?: { kind: string; line: number }[];
  };
}

export async function readAllStream(s: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(s).arrayBuffer());
}

/**
 * Bounded caches of what file reads need: per listing, path → where its line is in the listing
 * file (packed as `offset * 2^22 + length`: a line stays under 4 MiB, a PAX path being capped at
 * 1 MiB), so a cached lookup costs one short ranged read and memory stays ~100 bytes per path
 * rather than a parsed entry with two hex digests.
 */
const LOOKUP_CACHE_ENTRIES = 400_000;
/**
 * A gzip read that must inflate more than this from its checkpoint (a long dynamic or stored
 * deflate block, which a crafted layer can make 1 GiB long, or a layer indexed before version 3:
 * checkpoints inside fixed blocks bound those) takes the one long-read slot of the process;
 * another meanwhile is answered 429, so such a layer cannot multiply its cost by concurrent
 * requests.
 */
export const LONG_READ_BYTES = 64 * 1024 * 1024;

/** A listing with more entries is scanned per lookup instead of cached. */
const LOOKUP_CACHED_MAX = 200_000;
const LINE_BITS = 2 ** 22;

/** A listing line: its entry, byte offset and length in the listing file. */
export interface ListingLine {
  entry: ListedEntry;
  offset: number;
  length: number;
}

/** The lines of a listing (ndjson) as they stream in. */
export async function* listingLines(s: ReadableStream<Uint8Array>): AsyncGenerator<ListingLine> {
  const dec = new TextDecoder();
  let rest: Uint8Array = new Uint8Array(0);
  let base = 0;
  for await (const chunk of s) {
    let buf: Uint8Array = chunk;
    if (rest.length) {
      buf = new Uint8Array(rest.length + chunk.length);
      buf.set(rest);
      buf.set(chunk, rest.length);
    }
    let from = 0;
    let nl: number;
    while ((nl = buf.indexOf(0x0a, from)) >= 0) {
      if (nl > from) {
        yield {
          entry: JSON.parse(dec.decode(buf.subarray(from, nl))),
          offset: base + from,
          length: nl - from,
        };
      }
      from = nl + 1;
    }
    base += from;
    rest = buf.slice(from);
  }
  if (rest.length) {
    yield { entry: JSON.parse(dec.decode(rest)), offset: base, length: rest.length };
  }
}

export class LayerReader {
  private readonly lookups = new Map<string, Map<string, number>>();
  private lookupEntries = 0;
  private readonly tables = new Map<string, CheckpointRef[] | Frame[]>();
  private longRead = false;

  constructor(private readonly store: BlobStore) {}

  /** The listing entry of `path`, or null. */
  async entry(rec: IndexRecord, path: string): Promise<ListedEntry | null> {
    let map = this.lookups.get(rec.base);
    if (map) {
      // Refresh its place in the LRU order.
      this.lookups.delete(rec.base);
      this.lookups.set(rec.base, map);
    } else {
      if (rec.entries > LOOKUP_CACHED_MAX) return await this.scan(rec, path);
      map = new Map<string, number>();
      for await (const l of this.lines(rec)) {
        if (l.length < LINE_BITS) map.set(l.entry.path, l.offset * LINE_BITS + l.length);
      }
      this.lookups.set(rec.base, map);
      this.lookupEntries += map.size;
      while (this.lookupEntries > LOOKUP_CACHE_ENTRIES && this.lookups.size > 1) {
        const [k, v] = this.lookups.entries().next().value!;
        this.lookups.delete(k);
        this.lookupEntries -= v.size;
      }
    }
    const at = map.get(path);
    if (at === undefined) return null;
    const offset = Math.floor(at / LINE_BITS);
    const length = at % LINE_BITS;
    const line = await readAllStream(
      await this.store.readDerived(files.listing(rec.base), {
        start: offset,
        end: offset + length - 1,
      }),
    );
    return JSON.parse(new TextDecoder().decode(line));
  }

  private async scan(rec: IndexRecord, path: string): Promise<ListedEntry | null> {
    let found: ListedEntry | null = null;
    for await (const e of this.entries(rec)) if (e.path === path) found = e;
    return found;
  }

  /** Every entry of the listing, streamed. */
  async *entries(rec: IndexRecord): AsyncGenerator<ListedEntry> {
    for await (const l of this.lines(rec)) yield l.entry;
  }

  /** The listing file on local disk, which a sandbox may read itself; null: only streamed. */
  listingPath(rec: IndexRecord): string | null {
    return this.store.localDerivedPath?.(files.listing(rec.base)) ?? null;
  }

  /** The listing file's bytes (ndjson), for a reader elsewhere (the scan plan's sandbox). */
  listing(rec: IndexRecord): Promise<ReadableStream<Uint8Array>> {
    return this.store.readDerived(files.listing(rec.base));
  }

  /** Every listing line with its byte offset and length in the listing file. */
  private async *lines(rec: IndexRecord): AsyncGenerator<ListingLine> {
    yield* listingLines(await this.listing(rec));
  }

  /** Bytes [start, end] (inclusive) of the uncompressed stream of `digest`. */
  async read(
    digest: string,
    blobSize: number,
    rec: IndexRecord,
    start: number,
    end: number,
  ): Promise<ReadableStream<Uint8Array>> {
    if (end < start) return ReadableStream.from([]);
    switch (rec.compression) {
      case "gzip":
        return await this.readGzip(digest, blobSize, rec, start, end);
      case "zstd":
        return await this.readZstd(rec, start, end);
      default:
        return await this.store.read(digest, { start, end });
    }
  }

  private async table<T extends CheckpointRef[] | Frame[]>(
    key: string,
    load: () => Promise<T>,
  ): Promise<T> {
    const hit = this.tables.get(key);
    if (hit) return hit as T;
    const t = await load();
    if (this.tables.size >= 256) this.tables.delete(this.tables.keys().next().value!);
    this.tables.set(key, t);
    return t;
  }

  private async readGzip(
    digest: string,
    blobSize: number,
    rec: IndexRecord,
    start: number,
    end: number,
  ): Promise<ReadableStream<Uint8Array>> {
    const name = files.checkpoints(rec.base);
    const table = await this.table(
      name,
      async () =>
        decodeTable(
          checkedTable(await readAllStream(await this.store.readDerived(name)), name),
          true,
        ),
    );
    const cp = nearest(table, start) ??
      { uoff: 0, coff: 0, member: true, bits: 0, windowAt: 0, windowLength: 0 };
    const window = cp.windowLength
      ? await readAllStream(
        await this.store.readDerived(files.windows(rec.base), {
          start: cp.windowAt,
          end: cp.windowAt + cp.windowLength - 1,
        }),
      )
      : new Uint8Array(0);
    // The next checkpoint, when in the same member, bounds the compressed bytes this read needs:
    // a few MiB instead of the rest of the blob.
    const next = following(table, end, cp);
    const range = compressedRange(cp, next, blobSize);
    const long = end - cp.uoff > LONG_READ_BYTES;
    if (long) {
      if (this.longRead) {
        throw tooManyRequests("another read inside a long deflate block is being inflated", 1);
      }
      this.longRead = true;
    }
    try {
      const compressed = await this.store.read(digest, { start: range.start, end: range.end });
      const body = slice(
        inflateFrom(window, cp, compressed, range.cut ? next : null),
        start - cp.uoff,
        end - start + 1,
      );
      return long ? whenDone(body, () => this.longRead = false) : body;
    } catch (e) {
      if (long) this.longRead = false;
      throw e;
    }
  }

  private async readZstd(
    rec: IndexRecord,
    start: number,
    end: number,
  ): Promise<ReadableStream<Uint8Array>> {
    const frames = await this.table(
      files.frameTable(rec.base),
      async () =>
        decodeFrames(
          checkedTable(
            await readAllStream(await this.store.readDerived(files.frameTable(rec.base))),
            files.frameTable(rec.base),
          ),
        ),
    );
    let i = frameAt(frames, start);
    let pos = start;
    const store = this.store;
    return new ReadableStream<Uint8Array>({
      async pull(c) {
        if (pos > end || i >= frames.length) return c.close();
        const f = frames[i++];
        const raw = await readAllStream(
          await store.readDerived(files.frames(rec.base), {
            start: f.coff,
            end: f.coff + f.clen - 1,
          }),
        );
        const data = await decompressFrame(raw);
        const from = pos - f.uoff;
        const to = Math.min(f.ulen, end - f.uoff + 1);
        c.enqueue(data.subarray(from, to));
        pos = f.uoff + to;
      },
    }, { highWaterMark: 0 });
  }
}

/** A stored index table, checked (table_seal.ts): a damaged one is never used; 500 naming it. */
function checkedTable(bytes: Uint8Array, name: string): Uint8Array {
  const table = unsealTable(bytes);
  if (table) return table;
  countIntegrityFailure("index-table");
  log.error("a layer index table does not match its checksum: not used", { file: name });
  throw new RegistryError(
    "INTERNAL_ERROR",
    `the layer index file ${name} is damaged (its checksum does not match): "wharf reindex --force" rebuilds it`,
  );
}

/** `s`, calling `done` once when it ends, fails or is cancelled. */
function whenDone(s: ReadableStream<Uint8Array>, done: () => void): ReadableStream<Uint8Array> {
  const r = s.getReader();
  let called = false;
  const finish = () => {
    if (!called) done();
    called = true;
  };
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      try {
        const { value, done: end } = await r.read();
        if (end) {
          finish();
          c.close();
        } else c.enqueue(value);
      } catch (e) {
        finish();
        c.error(e);
      }
    },
    async cancel(reason) {
      finish();
      await r.cancel(reason);
    },
  }, { highWaterMark: 0 });
}

/** `length` bytes of `s` after skipping `skip`; cancels `s` once they are out. */
export function slice(
  s: ReadableStream<Uint8Array>,
  skip: number,
  length: number,
): ReadableStream<Uint8Array> {
  const r = s.getReader();
  let toSkip = skip;
  let left = length;
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      for (;;) {
        if (left <= 0) {
          await r.cancel().catch(() => {});
          return c.close();
        }
        const { value, done } = await r.read();
        if (done) {
          return left > 0 ? c.error(new Error("layer data ended early")) : c.close();
        }
        let v = value;
        if (toSkip >= v.length) {
          toSkip -= v.length;
          continue;
        }
        v = v.subarray(toSkip);
        toSkip = 0;
        if (v.length > left) v = v.subarray(0, left);
        left -= v.length;
        c.enqueue(v);
        return;
      }
    },
    cancel: (reason) => r.cancel(reason),
  }, { highWaterMark: 0 });
}
