// The gzip and zstd decoders' worker side of the walk: checkpoint_worker.ts either inflates the
// layer itself (native zlib or libzstd through FFI, making the gzip checkpoints as it goes) or
// only computes the checkpoints from the compressed bytes the walk's own decoder also reads.
// Chunks travel in pooled transfer buffers with credits both ways, so memory stays bounded
// however much the data expands.
import { type Checkpoint, CheckpointBuilder } from "./gzip_checkpoints.ts";
import { libraryPaths } from "./native_libs.ts";
import { CompressedDataError } from "./walk_errors.ts";

/** The most the worker is handed per message (and the pooled transfer buffers' size). */
export const PIECE = 256 * 1024;
/** Chunks the checkpoint worker may hold; each travels in a pooled buffer and comes back. */
const WORKER_IN_FLIGHT = 8;
/** Output buffers (256 KiB) the inflating worker may have sent that the walk has not taken. */
const WORKER_OUTPUT_CREDITS = 8;

export interface CheckpointsResult {
  /** table entries (windows empty: they went to `onWindow`) */
  checkpoints: Checkpoint[];
  lengths: number[];
  error: string | null;
}

function newCheckpointWorker(): Worker | null {
  try {
    return new Worker(new URL("./checkpoint_worker.ts", import.meta.url).href, {
      type: "module",
    });
  } catch {
    return null; // no workers (a restricted runtime)
  }
}

/**
 * Inflates the compressed stream in the checkpoint worker (native zlib), which also makes the
 * checkpoints; the result is the uncompressed stream. At most WORKER_IN_FLIGHT compressed chunks
 * and WORKER_OUTPUT_CREDITS output chunks are in flight, so memory stays bounded however much
 * the data expands. When the walk stops early (a limit, an error, the end-of-archive blocks),
 * the worker stops and the checkpoints made so far are the result.
 */
export function inflateInWorker(
  src: ReadableStream<Uint8Array>,
  onWindow: (w: Uint8Array) => void,
  codec: "gzip" | "zstd" = "gzip",
): {
  stream: ReadableStream<Uint8Array>;
  result: Promise<CheckpointsResult>;
  /** ends the pass where it is (the walk needs no more: the checkpoints so far cover it) */
  stop?: () => void;
} {
  const w = newCheckpointWorker();
  if (!w) {
    const stream = new ReadableStream<Uint8Array>({
      start: (c) => c.error(new Error("no worker for the native inflate")),
    });
    const result = Promise.reject(new Error("no worker"));
    result.catch(() => {});
    return { stream, result };
  }
  w.postMessage({
    init: {
      inflate: true,
      credits: WORKER_OUTPUT_CREDITS,
      zstd: codec === "zstd",
      libs: libraryPaths(),
    },
  });
  const pool: ArrayBuffer[] = [];
  const output: Uint8Array[] = [];
  let inFlight = 0;
  let finished: CheckpointsResult & { complete: boolean } | null = null;
  let failure: Error | null = null;
  // The feeding loop and the stream's pull may both be waiting.
  let waiters: (() => void)[] = [];
  const notify = () => {
    const all = waiters;
    waiters = [];
    for (const f of all) f();
  };
  const changed = () => new Promise<void>((r) => waiters.push(r));
  let resolveResult!: (v: CheckpointsResult) => void;
  let rejectResult!: (e: Error) => void;
  const result = new Promise<CheckpointsResult>((res, rej) => {
    resolveResult = res;
    rejectResult = rej;
  });
  result.catch(() => {});
  w.onmessage = (e) => {
    const m = e.data;
    if (m?.output) {
      output.push(new Uint8Array(m.output, 0, m.length));
    } else if (m?.ack) {
      inFlight--;
      if (m.buffer instanceof ArrayBuffer) pool.push(m.buffer);
    } else if (m?.checkpoint) {
      onWindow(new Uint8Array(m.window));
    } else if (m?.done) {
      finished = m;
      resolveResult({ checkpoints: m.checkpoints, lengths: m.lengths, error: m.error });
      w.terminate();
    }
    notify();
  };
  w.onerror = (e) => {
    e.preventDefault();
    failure = new Error(`checkpoint worker: ${e.message}`);
    rejectResult(failure);
    w.terminate();
    notify();
  };
  const reader = src.getReader();
  let stopped = false;
  // Feeds the worker as fast as it takes chunks; the output credits hold both sides back.
  (async () => {
    try {
      for (;;) {
        while (inFlight >= WORKER_IN_FLIGHT && !stopped && !failure && !finished) {
          await changed();
        }
        if (stopped || failure || finished) return;
        const { value, done } = await reader.read();
        if (stopped || failure || finished) return;
        if (done) {
          w.postMessage(null);
          return;
        }
        // The store may reuse a chunk's memory: the worker gets its own copy.
        for (let at = 0; at < value.length; at += PIECE) {
          const part = value.subarray(at, at + PIECE);
          const buf = pool.pop() ?? new ArrayBuffer(PIECE);
          new Uint8Array(buf).set(part);
          inFlight++;
          w.postMessage({ buffer: buf, length: part.length }, [buf]);
        }
      }
    } catch (e) {
      failure = e instanceof Error ? e : new Error(String(e));
      notify();
    }
  })();
  const stop = () => {
    if (stopped) return;
    stopped = true;
    if (!finished && !failure) w.postMessage({ stop: true });
    reader.cancel().catch(() => {});
    notify();
  };
  const stream = new ReadableStream<Uint8Array>({
    async pull(c) {
      for (;;) {
        const chunk = output.shift();
        if (chunk) {
          if (!finished) w.postMessage({ credit: 1 });
          c.enqueue(chunk);
          return;
        }
        if (failure) {
          stop();
          return c.error(failure);
        }
        if (finished) {
          reader.cancel().catch(() => {});
          if (finished.complete) return c.close();
          return c.error(new CompressedDataError(finished.error ?? `${codec} stream truncated`));
        }
        await changed();
      }
    },
    cancel() {
      stop();
    },
  }, { highWaterMark: 0 });
  return { stream, result, stop };
}

/**
 * Passes the compressed stream through while a worker computes the gzip checkpoints from the
 * same bytes; at most WORKER_IN_FLIGHT chunks wait for it, so memory stays bounded.
 */
export function feedCheckpoints(
  src: ReadableStream<Uint8Array>,
  onWindow: (w: Uint8Array) => void,
): {
  stream: ReadableStream<Uint8Array>;
  result: Promise<CheckpointsResult>;
} {
  const worker = newCheckpointWorker();
  if (!worker) {
    const b = new CheckpointBuilder(undefined, (c) => onWindow(c.window));
    // Settled when the input ends or the walk stops reading (a limit): the checkpoints made
    // from what was read are the result either way.
    let settle!: () => void;
    const result = new Promise<CheckpointsResult>((res) => {
      settle = () => res({ ...b.finish(), lengths: b.lengths });
    });
    const reader = src.getReader();
    const stream = new ReadableStream<Uint8Array>({
      async pull(c) {
        const { value, done } = await reader.read();
        if (done) {
          settle();
          return c.close();
        }
        b.push(value);
        c.enqueue(value);
      },
      async cancel(reason) {
        settle();
        await reader.cancel(reason);
      },
    }, { highWaterMark: 0 });
    return { stream, result };
  }
  const w = worker;
  w.postMessage({ init: { inflate: false, libs: libraryPaths() } });
  // Transfer buffers go to the worker and come back with its acknowledgement, so neither side
  // allocates per chunk (fresh ArrayBuffers are freed only under external-memory pressure,
  // which is RSS).
  const pool: ArrayBuffer[] = [];
  let inFlight = 0;
  let acked: (() => void) | null = null;
  let resolveResult!: (v: CheckpointsResult) => void;
  let rejectResult!: (e: Error) => void;
  const result = new Promise<CheckpointsResult>((res, rej) => {
    resolveResult = res;
    rejectResult = rej;
  });
  result.catch(() => {});
  w.onmessage = (e) => {
    if (e.data?.ack) {
      inFlight--;
      if (e.data.buffer instanceof ArrayBuffer) pool.push(e.data.buffer);
      acked?.();
    } else if (e.data?.checkpoint) {
      onWindow(new Uint8Array(e.data.window));
    } else if (e.data?.done) {
      resolveResult({
        checkpoints: e.data.checkpoints,
        lengths: e.data.lengths,
        error: e.data.error,
      });
      w.terminate();
    }
  };
  w.onerror = (e) => {
    e.preventDefault();
    rejectResult(new Error(`checkpoint worker: ${e.message}`));
    w.terminate();
  };
  const reader = src.getReader();
  const stream = new ReadableStream<Uint8Array>({
    async pull(c) {
      const { value, done } = await reader.read();
      if (done) {
        w.postMessage(null);
        return c.close();
      }
      while (inFlight >= WORKER_IN_FLIGHT) await new Promise<void>((r) => (acked = r));
      // The store may reuse a chunk's memory: the worker gets its own copy.
      const buf = pool.pop() ?? new ArrayBuffer(PIECE);
      const n = Math.min(value.length, buf.byteLength);
      new Uint8Array(buf).set(value.subarray(0, n));
      inFlight++;
      w.postMessage({ buffer: buf, length: n }, [buf]);
      c.enqueue(value);
    },
    async cancel(reason) {
      // The walk stopped reading (a limit, a tar error): the worker ends its input there and
      // answers with the checkpoints of what it was given, for the partial listing.
      w.postMessage(null);
      await reader.cancel(reason);
    },
  }, { highWaterMark: 0 });
  return { stream, result };
}
