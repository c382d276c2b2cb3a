// A request body's chunks as both blob stores write them: into one reused buffer.
import { Scavenger } from "../streams/mod.ts";

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
