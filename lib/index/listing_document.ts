// A layer's listing in the two forms it is read in. The NDJSON file (one entry per line) is what
// file lookups scan. The entries endpoint's JSON document is also written, gzipped, in the same
// pass: a 100k-entry listing is ~37 MB of JSON that took ~0.5 s to re-join and another ~0.4 s
// to gzip per request (and seconds on a busy machine), while the stored document (~1 MB for
// that layer) is sent as it is. The document puts `entries` first because only its tail
// (`refreshing`, `partial`, the sizes) is unknown until the walk ends.
import type { BlobStore } from "../storage/mod.ts";
import { type Compression, files, type IndexRecord } from "./layer_store.ts";

const enc = new TextEncoder();

/** What the document's tail says besides the entries (SPEC §Layer listing). */
export interface ListingTail {
  refreshing: boolean;
  compression: Compression | null;
  uncompressedSize: number;
  state: IndexRecord["state"];
  error?: string;
}

function tail(t: ListingTail): string {
  const partial = t.state === "partial"
    ? `,"partial":true,"error":${JSON.stringify(t.error ?? "")}`
    : "";
  return `],"refreshing":${t.refreshing},"compressed":${
    t.compression !== "none"
  },"uncompressed_size":${t.uncompressedSize}${partial}}`;
}

/** Writes listing.ndjson and listing.json.gz side by side, batch by batch. */
export class ListingWriter {
  readonly #ndjson: WritableStreamDefaultWriter<Uint8Array>;
  readonly #document: WritableStreamDefaultWriter<Uint8Array>;
  readonly #done: Promise<[number, number]>;
  #first = true;

  constructor(store: Pick<BlobStore, "writeDerived">, base: string) {
    const ndjson = new TransformStream<Uint8Array, Uint8Array>();
    const gz = new CompressionStream("gzip") as unknown as TransformStream<Uint8Array, Uint8Array>;
    this.#ndjson = ndjson.writable.getWriter();
    this.#document = gz.writable.getWriter();
    // A store that fails before reading (no space, S3 down) never takes a byte and the writes
    // waiting on it would hang the walk: cancelling the unread side errors them. (One that
    // fails while reading cancels it itself.)
    const written = (name: string, readable: ReadableStream<Uint8Array>) =>
      store.writeDerived(name, readable).catch((e) => {
        if (!readable.locked) void readable.cancel(e).catch(() => {});
        throw e;
      });
    this.#done = Promise.all([
      written(files.listing(base), ndjson.readable),
      written(files.listingDocument(base), gz.readable),
    ]);
    this.#done.catch(() => {});
    void this.#document.write(enc.encode(`{"entries":[`)).catch(() => {});
  }

  /** Entries, each already JSON. */
  async write(lines: string[]): Promise<void> {
    if (lines.length === 0) return;
    const doc = (this.#first ? "" : ",") + lines.join(",");
    this.#first = false;
    await Promise.all([
      this.#ndjson.write(enc.encode(lines.join("\n") + "\n")),
      this.#document.write(enc.encode(doc)),
    ]);
  }

  /** Closes both files; resolves to the stored size of the gzipped document. */
  async close(t: Omit<ListingTail, "refreshing">): Promise<number> {
    await this.#document.write(enc.encode(tail({ ...t, refreshing: false })));
    await Promise.all([this.#ndjson.close(), this.#document.close()]);
    const [, docSize] = await this.#done;
    return docSize;
  }

  async abort(reason: unknown): Promise<void> {
    await Promise.all([
      this.#ndjson.abort(reason).catch(() => {}),
      this.#document.abort(reason).catch(() => {}),
    ]);
    await this.#done.catch(() => {});
  }
}

/** The entries endpoint's body for `rec`, gzipped when `gzip` and that is cheaper to send. */
export async function listingDocument(
  store: BlobStore,
  rec: IndexRecord,
  refreshing: boolean,
  gzip: boolean,
): Promise<{ body: ReadableStream<Uint8Array>; gzipped: boolean; length?: number }> {
  // The stored document says `refreshing: false`; a refreshing answer is rebuilt from the NDJSON.
  if (rec.documentSize !== undefined && !refreshing) {
    const stored = await store.readDerived(files.listingDocument(rec.base));
    if (gzip) return { body: stored, gzipped: true, length: rec.documentSize };
    return {
      body: stored.pipeThrough(
        new DecompressionStream("gzip") as unknown as TransformStream<Uint8Array, Uint8Array>,
      ),
      gzipped: false,
    };
  }
  const body = joinNdjson(await store.readDerived(files.listing(rec.base)), { ...rec, refreshing });
  if (!gzip) return { body, gzipped: false };
  return {
    body: body.pipeThrough(
      new CompressionStream("gzip") as unknown as TransformStream<Uint8Array, Uint8Array>,
    ),
    gzipped: true,
  };
}

/**
 * The document from the NDJSON file (a listing indexed before the document was stored, or one
 * served `refreshing`). Entry lines never hold a raw newline (JSON escapes it), so turning the
 * separators into commas is a byte operation; blank lines are dropped.
 */
export function joinNdjson(
  ndjson: ReadableStream<Uint8Array>,
  t: ListingTail,
): ReadableStream<Uint8Array> {
  const NL = 10, COMMA = 44;
  let wrote = false; // an entry byte has gone out
  let comma = false; // a separator is owed before the next entry byte
  return ndjson.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      start(c) {
        c.enqueue(enc.encode(`{"entries":[`));
      },
      transform(chunk, c) {
        const out = new Uint8Array(chunk.length + 1);
        let o = 0;
        let from = 0;
        while (from < chunk.length) {
          const nl = chunk.indexOf(NL, from);
          const to = nl < 0 ? chunk.length : nl;
          if (to > from) {
            if (comma) out[o++] = COMMA;
            comma = false;
            out.set(chunk.subarray(from, to), o);
            o += to - from;
            wrote = true;
          }
          if (nl < 0) break;
          if (wrote) comma = true;
          from = nl + 1;
        }
        if (o) c.enqueue(out.subarray(0, o));
      },
      flush(c) {
        c.enqueue(enc.encode(tail(t)));
      },
    }),
  );
}
