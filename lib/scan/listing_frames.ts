// Layer listings for a sandbox that merges them (the scan plan, plan_child.ts; the image diff,
// diff_child.ts), in groups (one per image). A child process reads the listing files on the
// store's disk itself: piping a million-entry listing (360 MB) through the serving process cost
// it ~60 MiB of RSS. Elsewhere (S3, worker mode) they go on the child's input: each group's
// layers highest first (the order mergeLayers reads them in), each as chunks framed by a 4-byte
// big-endian length, a zero length ending the layer; chunks go as they were read from the store,
// behind their length, so nothing is copied or held whole on either side.
import {
  type IndexRecord,
  type LayerReader,
  type ListedEntry,
  listingLines,
} from "../index/mod.ts";
import type { SandboxMode } from "../config/mod.ts";

/**
 * Listings of at most this many entries (an image, or an image pair for a diff) are merged in
 * the serving process (tens of milliseconds, in steps between listing reads) rather than paying
 * a process start.
 */
export const INLINE_MERGE_ENTRIES = 50_000;

/** What the child is told about its listings (part of its arguments). */
export interface ListingsInput {
  /** layers per group */
  counts: number[];
  /** per group, the listing files (lowest layer first; null: none) the child reads itself */
  paths?: (string | null)[][];
}

/** The listings of `groups` (per group, lowest layer first; null: no listing) for a sandbox. */
export function listingsFor(
  reader: LayerReader,
  groups: (IndexRecord | null)[][],
  mode: Exclude<SandboxMode, "off">,
): { input: ListingsInput; readPaths?: string[]; stdin?: ReadableStream<Uint8Array> } {
  const counts = groups.map((g) => g.length);
  const paths = groups.map((g) => g.map((rec) => rec ? reader.listingPath(rec) : null));
  const local = mode === "process" &&
    paths.every((g, i) => g.every((p, j) => p !== null || groups[i][j] === null));
  if (local) {
    return {
      input: { counts, paths },
      readPaths: paths.flat().filter((p): p is string => p !== null),
    };
  }
  return {
    input: { counts },
    stdin: ReadableStream.from(
      encodeListings(groups.map((g) => g.map((rec) => rec ? () => reader.listing(rec) : null))),
    ),
  };
}

/** The frames of each group's layers (lowest first; null: no listing), highest first. */
export async function* encodeListings(
  groups: Array<(() => Promise<ReadableStream<Uint8Array>>) | null>[],
): AsyncGenerator<Uint8Array> {
  for (const layers of groups) {
    for (let li = layers.length - 1; li >= 0; li--) {
      const open = layers[li];
      if (open) {
        for await (const chunk of await open()) {
          if (chunk.length === 0) continue;
          yield length(chunk.length);
          yield chunk;
        }
      }
      yield length(0);
    }
  }
}

function length(n: number): Uint8Array {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, n);
  return b;
}

/** Reads exact byte counts from a stream. */
class ExactReader {
  private buf: Uint8Array = new Uint8Array(0);
  constructor(private readonly r: ReadableStreamDefaultReader<Uint8Array>) {}

  /** The next `n` bytes; fewer only at the end of the stream. */
  async take(n: number): Promise<Uint8Array> {
    while (this.buf.length < n) {
      const { value, done } = await this.r.read();
      if (done) break;
      if (this.buf.length === 0) this.buf = value;
      else {
        const b = new Uint8Array(this.buf.length + value.length);
        b.set(this.buf);
        b.set(value, this.buf.length);
        this.buf = b;
      }
    }
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(out.length);
    return out;
  }
}

type EntryStreams = Array<() => AsyncIterable<ListedEntry>>;

/**
 * In the child: per group, the entry streams of its layers (lowest first), from the files it
 * was given or from `input()`. Framed layers must be asked for in the order they were sent:
 * group by group, each highest layer first, as mergeLayers does.
 */
export function openListings(
  listings: ListingsInput,
  input: () => ReadableStream<Uint8Array>,
): EntryStreams[] {
  if (listings.paths) {
    return listings.paths.map((g) => g.map((p) => () => fileEntries(p)));
  }
  const exact = new ExactReader(input().getReader());
  const order = listings.counts.flatMap((n, g) =>
    Array.from({ length: n }, (_, i) => `${g}/${n - 1 - i}`)
  );
  let next = 0;
  return listings.counts.map((n, g) =>
    Array.from({ length: n }, (_, li) => () => {
      if (order[next] !== `${g}/${li}`) throw new Error(`layer ${g}/${li} asked for out of order`);
      next++;
      return framedEntries(exact);
    })
  );
}

async function* fileEntries(path: string | null): AsyncGenerator<ListedEntry> {
  if (path === null) return;
  const f = await Deno.open(path, { read: true });
  for await (const l of listingLines(f.readable)) yield l.entry;
}

async function* framedEntries(exact: ExactReader): AsyncGenerator<ListedEntry> {
  const chunks = new ReadableStream<Uint8Array>({
    async pull(c) {
      const head = await exact.take(4);
      if (head.length < 4) return c.error(new Error("the listings ended early"));
      const n = new DataView(head.buffer, head.byteOffset, 4).getUint32(0);
      if (n === 0) return c.close();
      const chunk = await exact.take(n);
      if (chunk.length < n) return c.error(new Error("the listings ended early"));
      c.enqueue(chunk);
    },
  });
  for await (const l of listingLines(chunks)) yield l.entry;
}
