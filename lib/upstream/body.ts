// An upstream response body that can neither hang nor lie about its length: a stall past the
// read timeout, an early end or bytes beyond Content-Length error the stream.
import { parseContentLength } from "../oci/mod.ts";
import type { UpstreamError, UpstreamErrorKind, UpstreamErrorOptions } from "./errors.ts";

export interface BodyGuard {
  /** the longest wait for the next chunk */
  readTimeoutMs: number;
  /** names the exchange in errors: `GET blob x@sha256:…` */
  what: string;
  /** builds an error naming the upstream */
  error: (kind: UpstreamErrorKind, what: string, opts?: UpstreamErrorOptions) => UpstreamError;
  /** tears the connection down */
  abort: () => void;
  /** once, when the body ends: null for a clean end or a cancel by the consumer */
  onEnd?: (error: UpstreamError | null) => void;
}

/** Deno's fetch errors name the URL (query and all: presigned signatures); keep the reason. */
export function networkReason(e: unknown): string {
  const err = e as { message?: string; cause?: { message?: string } };
  const raw = String(err?.cause?.message ?? err?.message ?? e);
  return raw.replace(/error sending request for url \(.*?\): /, "");
}

export function secs(ms: number): string {
  return `${Math.round(ms) / 1000} s`;
}

/** Content-Length when it describes the bytes we read (no content coding); null otherwise. */
export function declaredLength(res: Response): number | null {
  const coding = res.headers.get("content-encoding");
  if (coding !== null && coding.trim().toLowerCase() !== "identity") return null;
  const v = res.headers.get("content-length");
  return v === null ? null : parseContentLength(v);
}

/** The most one read of an upstream body takes (see `bodyReader`). */
const READ_BLOCK = 1 << 20;

/**
 * Reads `body` in the largest pieces it has ready. Deno's fetch body is a byte stream: a default
 * reader gets it in ~58 KiB chunks (580 per 33 MiB layer, each then hashed, kept, written and
 * sent on its own), a BYOB read into a 1 MiB buffer takes whatever has arrived, ~260 KiB at a
 * time, so every stage after does a quarter of the calls. The piece is copied out so the buffer
 * is reused and what stays in memory is exactly its size.
 */
function bodyReader(body: ReadableStream<Uint8Array> | null, declared: number | null): {
  read: () => Promise<ReadableStreamReadResult<Uint8Array>>;
  cancel: (reason?: unknown) => Promise<void>;
} | null {
  if (!body) return null;
  let byob: ReadableStreamBYOBReader | null = null;
  try {
    byob = body.getReader({ mode: "byob" });
  } catch {
    // not a byte stream (a Response built around an ordinary stream)
  }
  if (!byob) {
    const r = body.getReader();
    return { read: () => r.read(), cancel: (reason) => r.cancel(reason) };
  }
  const b = byob;
  // No bigger than the body needs (+1 to see a byte too many): a zeroed 1 MiB per small blob
  // costs more than reading it.
  let scratch = new Uint8Array(
    declared === null ? READ_BLOCK : Math.max(1, Math.min(READ_BLOCK, declared + 1)),
  );
  return {
    read: async () => {
      const r = await b.read(scratch);
      if (r.done) return { done: true, value: undefined };
      const got = new Uint8Array(r.value.buffer, r.value.byteOffset, r.value.byteLength);
      scratch = new Uint8Array(r.value.buffer);
      return { done: false, value: got.slice() };
    },
    cancel: (reason) => b.cancel(reason),
  };
}

export function guardBody(res: Response, g: BodyGuard): ReadableStream<Uint8Array> {
  const declared = declaredLength(res);
  const reader = bodyReader(res.body, declared);
  const of = declared === null ? "" : ` of ${declared}`;
  const stallError = () =>
    g.error(
      "timeout",
      `${g.what}: body stalled for ${secs(g.readTimeoutMs)} after ${received}${of} bytes`,
    );
  let received = 0;
  let ended = false;
  // One timer for the whole body rather than one per chunk (a setTimeout, a Promise.race and a
  // clearTimeout for each of a 256 MiB blob's ~4,500 chunks): it wakes once per read timeout and
  // checks how long the current read has been waiting.
  let waitingSince = -1;
  let stalled = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const watch = (ms: number) => {
    timer = setTimeout(() => {
      timer = undefined;
      if (ended || waitingSince < 0) return;
      const waited = performance.now() - waitingSince;
      if (waited < g.readTimeoutMs) return watch(g.readTimeoutMs - waited);
      stalled = true;
      reader?.cancel().catch(() => {});
    }, ms);
  };
  const end = (c: ReadableStreamDefaultController<Uint8Array>, err: UpstreamError | null) => {
    ended = true;
    clearTimeout(timer);
    if (err) {
      g.abort();
      reader?.cancel().catch(() => {});
      c.error(err);
    } else {
      c.close();
    }
    g.onEnd?.(err);
  };
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      if (!reader) {
        const short = declared !== null && declared > 0;
        return end(c, short ? g.error("invalid", `${g.what}: no body`) : null);
      }
      waitingSince = performance.now();
      if (timer === undefined) watch(g.readTimeoutMs);
      let r: ReadableStreamReadResult<Uint8Array>;
      try {
        r = await reader.read();
      } catch (e) {
        if (stalled) return end(c, stallError());
        // The connection broke mid-body: a network fault, worth retrying.
        return end(
          c,
          g.error(
            "invalid",
            `${g.what}: body cut off after ${received}${of} bytes: ${networkReason(e)}`,
            { retryable: true, cause: e },
          ),
        );
      } finally {
        waitingSince = -1;
      }
      if (stalled) return end(c, stallError());
      if (r.done) {
        if (declared !== null && received < declared) {
          return end(
            c,
            g.error("invalid", `${g.what}: body ended after ${received}${of} bytes`, {
              retryable: true,
            }),
          );
        }
        return end(c, null);
      }
      received += r.value.byteLength;
      if (declared !== null && received > declared) {
        return end(
          c,
          g.error("invalid", `${g.what}: body longer than its Content-Length ${declared}`),
        );
      }
      c.enqueue(r.value);
    },
    async cancel(reason) {
      if (ended) return;
      ended = true;
      clearTimeout(timer);
      g.abort();
      await reader?.cancel(reason).catch(() => {});
      g.onEnd?.(null);
    },
  });
}
