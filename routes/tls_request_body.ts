// A request body of the TLS listener as a byte stream, with real backpressure down to the TCP
// socket: blob uploads of many GiB pass through here.
import type { IncomingMessage, ServerResponse } from "node:http";

/** Bytes of request body held before the socket is paused. */
const REQUEST_BODY_HIGH_WATER = 256 * 1024;
/** Chunk size handed to default (non-BYOB) readers of a request body. */
const REQUEST_BODY_CHUNK = 64 * 1024;

/**
 * The request body as a byte stream, so a BYOB reader can refill one buffer (what the blob store
 * does); node's chunks are copied out because they may share a pooled ArrayBuffer.
 */
export function bodyStream(
  req: IncomingMessage,
  res: ServerResponse,
  aborted: AbortController,
): ReadableStream<Uint8Array> {
  const queue: Uint8Array[] = [];
  let queued = 0;
  let ended = false;
  let cancelled = false;
  let failure: Error | null = null;
  let wake: (() => void) | null = null;
  const poke = () => {
    const w = wake;
    wake = null;
    w?.();
  };
  const flow = socketFlow(req);
  req.on("data", (chunk: Uint8Array) => {
    if (cancelled) return;
    queue.push(chunk);
    queued += chunk.byteLength;
    if (queued >= REQUEST_BODY_HIGH_WATER) flow.stop();
    poke();
  });
  req.on("end", () => {
    ended = true;
    poke();
  });
  const fail = (e: Error) => {
    failure ??= e;
    poke();
  };
  const clientGone = () => {
    const e = new Error("client aborted the request body");
    fail(e);
    aborted.abort(e);
  };
  req.on("error", clientGone);
  req.on("aborted", clientGone);
  req.on("close", () => {
    if (!req.complete) clientGone();
  });
  flow.stop();
  // A response sent before the body was read: node goes on reading the rest (to reach the next
  // request on the connection), which needs the socket flowing and our queue out of the way.
  res.once("finish", () => {
    if (ended) return;
    cancelled = true;
    queue.length = 0;
    queued = 0;
    failure ??= new Error("the response was sent before the request body was read");
    poke();
    flow.start();
  });

  return new ReadableStream({
    type: "bytes",
    autoAllocateChunkSize: REQUEST_BODY_CHUNK,
    async pull(ctl) {
      while (queue.length === 0 && !ended && failure === null) {
        const arrived = new Promise<void>((r) => wake = r);
        flow.start();
        await arrived;
      }
      if (failure !== null) {
        ctl.error(failure);
        return;
      }
      const byob = ctl.byobRequest!;
      if (queue.length === 0) {
        ctl.close();
        byob.respond(0);
        return;
      }
      const view = byob.view!;
      const dst = new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
      let n = 0;
      while (queue.length > 0 && n < dst.byteLength) {
        const head = queue[0];
        const take = Math.min(head.byteLength, dst.byteLength - n);
        dst.set(take === head.byteLength ? head : head.subarray(0, take), n);
        n += take;
        if (take === head.byteLength) queue.shift();
        else queue[0] = head.subarray(take);
      }
      queued -= n;
      byob.respond(n);
      if (queued < REQUEST_BODY_HIGH_WATER && !ended) flow.start();
    },
    cancel() {
      // Keep reading so node can parse the next request on this keep-alive connection.
      cancelled = true;
      queue.length = 0;
      queued = 0;
      flow.start();
    },
  });
}

interface ReadHandle {
  readStart(): number;
  readStop(): number;
}

/**
 * Pauses and resumes the flow of a request body down to the TCP socket. Deno's TLSWrap (2.9.6)
 * ignores readStop, so pausing the request or the TLS socket leaves the TCP connection read at
 * full speed into memory (measured: 512 MiB pushed into a paused request, RSS +770 MiB). Stopping
 * the TCP handle beneath it restores real backpressure; in Node the TLS socket owns the TCP
 * handle directly (no `_parent`), and req.pause() already suffices there.
 */
function socketFlow(req: IncomingMessage): { stop(): void; start(): void } {
  const parent = (req.socket as unknown as { _parent?: { _handle?: Partial<ReadHandle> } })
    ._parent;
  let stopped = false;
  const tcp = () => {
    const h = parent?._handle;
    return h && typeof h.readStop === "function" && typeof h.readStart === "function"
      ? h as ReadHandle
      : null;
  };
  return {
    stop() {
      req.pause();
      const h = tcp();
      if (!stopped && h && !req.socket.destroyed) {
        h.readStop();
        stopped = true;
      }
    },
    start() {
      const h = tcp();
      if (stopped && h && !req.socket.destroyed) h.readStart();
      stopped = false;
      req.resume();
    },
  };
}
