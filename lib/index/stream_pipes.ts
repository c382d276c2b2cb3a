// Byte streams the gzip reader and the layer decoder join: a stream between a head and a tail,
// and a node:zlib transform run with backpressure both ways.

export function concatStreams(
  head: Uint8Array,
  rest: ReadableStream<Uint8Array>,
  tail?: Uint8Array,
): ReadableStream<Uint8Array> {
  let reader: ReadableStreamDefaultReader<Uint8Array> | null = null;
  let sentHead = head.length === 0;
  let done = false;
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      if (!sentHead) {
        sentHead = true;
        c.enqueue(head);
        return;
      }
      if (done) return c.close();
      reader ??= rest.getReader();
      const r = await reader.read();
      if (!r.done) return c.enqueue(r.value);
      done = true;
      if (tail) c.enqueue(tail);
      else c.close();
    },
    cancel(reason) {
      return reader ? reader.cancel(reason) : rest.cancel(reason);
    },
  }, { highWaterMark: 0 });
}

/**
 * Runs `input` through a node:zlib transform with backpressure both ways, dropping the first
 * `skip` output bytes. Cancelling the result stops the transform and the input.
 */
const PIPE_QUEUE = 2 * 1024 * 1024;

export function pipeNode(
  input: ReadableStream<Uint8Array>,
  z: NodeJS.ReadWriteStream & { destroy(e?: Error): void },
  skip: number,
): ReadableStream<Uint8Array> {
  const reader = input.getReader();
  let stopped = false;
  (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done || stopped) break;
        // Up to 2 MiB may wait in the transform: waiting for 'drain' after every chunk (its
        // high-water mark is 16 KiB) ran zstd at a third of its speed. The store's ring reader
        // reuses a buffer 3 chunks of 4 MiB later, so queued chunks are never overwritten.
        z.write(value);
        const w = z as unknown as { writableLength: number };
        if (w.writableLength > PIPE_QUEUE) await new Promise((r) => z.once("drain", r));
      }
      if (!stopped) z.end();
    } catch (e) {
      if (!stopped) z.destroy(e instanceof Error ? e : new Error(String(e)));
    }
  })();
  // node's Readable.toWeb enqueues after a cancel (an uncaught error): adapt by hand, with
  // pause/resume as the backpressure.
  const queue: Uint8Array[] = [];
  let queued = 0;
  let ended = false;
  let failure: Error | null = null;
  let notify: (() => void) | null = null;
  let toSkip = skip;
  const onData = (b: Uint8Array) => {
    if (toSkip >= b.length) {
      toSkip -= b.length;
      return;
    }
    const v = toSkip ? b.subarray(toSkip) : b;
    toSkip = 0;
    queue.push(v);
    queued += v.length;
    if (queued > 1024 * 1024) z.pause();
    notify?.();
  };
  z.on("data", onData);
  z.on("end", () => {
    ended = true;
    notify?.();
  });
  z.on("error", (e: Error) => {
    failure = e;
    notify?.();
  });
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      for (;;) {
        const v = queue.shift();
        if (v) {
          queued -= v.length;
          if (queued <= 256 * 1024) z.resume();
          c.enqueue(v);
          return;
        }
        if (failure) return c.error(failure);
        if (ended) return c.close();
        z.resume();
        await new Promise<void>((r) => (notify = r));
        notify = null;
      }
    },
    async cancel(reason) {
      stopped = true;
      z.off("data", onData);
      z.destroy();
      await reader.cancel(reason).catch(() => {});
    },
  }, { highWaterMark: 0 });
}
