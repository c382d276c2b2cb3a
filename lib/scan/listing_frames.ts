// An image's layer listings on one byte stream, for the scan plan's sandbox (plan_child.ts):
// highest layer first (the order mergeLayers reads them in), each as chunks framed by a 4-byte
// big-endian length, a zero length ending the layer. Chunks go as they were read from the
// store, behind their length, so nothing is copied or held whole on either side.
import { type ListedEntry, listingLines } from "../index/mod.ts";

/** The frames of `layers` (lowest first; null: a layer without a listing), highest first. */
export async function* encodeListings(
  layers: Array<(() => Promise<ReadableStream<Uint8Array>>) | null>,
): AsyncGenerator<Uint8Array> {
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

/**
 * The entry streams of `count` layers (lowest first) from `input`; each must be asked for once,
 * highest first, as mergeLayers does.
 */
export function decodeListings(
  input: ReadableStream<Uint8Array>,
  count: number,
): Array<() => AsyncIterable<ListedEntry>> {
  const exact = new ExactReader(input.getReader());
  let expected = count - 1;
  return Array.from({ length: count }, (_, li) => () => {
    if (li !== expected) throw new Error(`layer ${li} asked for out of order`);
    expected--;
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
    return (async function* () {
      for await (const l of listingLines(chunks)) yield l.entry;
    })();
  });
}
