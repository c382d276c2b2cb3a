// A raw HTTP/1.1 client over a plain socket, for requests fetch refuses to produce: `..` in
// paths, bad Content-Length values, bodies shorter than their declared length, half-closes.
import { concat } from "./bytes.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

export interface RawRequest {
  method: string;
  /** the request-target, sent verbatim */
  target: string;
  headers?: [string, string][];
  body?: Uint8Array;
  /** `length` adds Content-Length, `chunked` encodes the body, `raw` leaves framing to headers;
   * the default is `length` with a body and `raw` without */
  framing?: "length" | "chunked" | "raw";
  /** half-close after writing, for bodies shorter than their declared length */
  halfClose?: boolean;
}

export interface RawResponse {
  /** 0 when no complete status line and header block arrived */
  status: number;
  headers: Headers;
  body: Uint8Array;
  /** what went wrong on the socket (write, read, timeout), if anything */
  error?: string;
}

function indexOfCrlf(b: Uint8Array, from: number, double: boolean): number {
  for (let i = from; i + (double ? 3 : 1) < b.length; i++) {
    if (b[i] === 13 && b[i + 1] === 10 && (!double || (b[i + 2] === 13 && b[i + 3] === 10))) {
      return i;
    }
  }
  return -1;
}

function dechunk(b: Uint8Array): { body: Uint8Array; complete: boolean } {
  const parts: Uint8Array[] = [];
  let i = 0;
  while (true) {
    const le = indexOfCrlf(b, i, false);
    if (le < 0) return { body: concat(...parts), complete: false };
    const size = parseInt(dec.decode(b.subarray(i, le)).split(";")[0], 16);
    if (Number.isNaN(size)) return { body: concat(...parts), complete: false };
    if (size === 0) return { body: concat(...parts), complete: true };
    const start = le + 2;
    if (b.length < start + size + 2) {
      parts.push(b.subarray(start, Math.min(b.length, start + size)));
      return { body: concat(...parts), complete: false };
    }
    parts.push(b.subarray(start, start + size));
    i = start + size + 2;
  }
}

function parseResponse(b: Uint8Array, method: string): RawResponse & { complete: boolean } {
  const empty = { status: 0, headers: new Headers(), body: new Uint8Array(0), complete: false };
  const he = indexOfCrlf(b, 0, true);
  if (he < 0) return empty;
  const lines = dec.decode(b.subarray(0, he)).split("\r\n");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0])?.[1] ?? 0);
  const rest = b.subarray(he + 4);
  // an interim 1xx precedes the real response
  if (status >= 100 && status < 200 && status !== 101) return parseResponse(rest, method);
  const headers = new Headers();
  for (const l of lines.slice(1)) {
    const i = l.indexOf(":");
    if (i > 0) {
      try {
        headers.append(l.slice(0, i).trim(), l.slice(i + 1).trim());
      } catch { /* a header value fetch's Headers refuses; irrelevant here */ }
    }
  }
  if (method === "HEAD" || status === 204 || status === 304) {
    return { status, headers, body: new Uint8Array(0), complete: true };
  }
  if (/chunked/i.test(headers.get("transfer-encoding") ?? "")) {
    return { status, headers, ...dechunk(rest) };
  }
  const cl = headers.get("content-length");
  if (cl !== null) {
    const n = Number(cl);
    return { status, headers, body: rest.subarray(0, n), complete: rest.length >= n };
  }
  return { status, headers, body: rest, complete: false };
}

/** `body` in chunked transfer coding, 4 KiB a chunk. */
export function chunkBody(body: Uint8Array): Uint8Array {
  const parts: Uint8Array[] = [];
  for (let i = 0; i < body.length; i += 4096) {
    const c = body.subarray(i, i + 4096);
    parts.push(enc.encode(`${c.length.toString(16)}\r\n`), c, enc.encode("\r\n"));
  }
  parts.push(enc.encode("0\r\n\r\n"));
  return concat(...parts);
}

/**
 * One request on a fresh connection (`Connection: close`), read until the response is complete
 * or the server closes. Never throws for socket trouble: the response says what arrived and
 * `error` what went wrong.
 */
export async function sendRaw(
  port: number,
  r: RawRequest,
  timeoutMs = 15_000,
): Promise<RawResponse> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    try {
      conn.close();
    } catch { /* already closed */ }
  }, timeoutMs);
  const received: Uint8Array[] = [];
  let error: string | undefined;
  try {
    const head = [
      `${r.method} ${r.target} HTTP/1.1`,
      `Host: 127.0.0.1:${port}`,
      "Connection: close",
    ];
    for (const [k, v] of r.headers ?? []) head.push(`${k}: ${v}`);
    const framing = r.framing ?? (r.body ? "length" : "raw");
    let payload = r.body ?? new Uint8Array(0);
    if (framing === "length") head.push(`Content-Length: ${payload.length}`);
    if (framing === "chunked") {
      head.push("Transfer-Encoding: chunked");
      payload = chunkBody(payload);
    }
    const bytes = concat(enc.encode(head.join("\r\n") + "\r\n\r\n"), payload);
    try {
      for (let o = 0; o < bytes.length;) o += await conn.write(bytes.subarray(o));
      if (r.halfClose) {
        // Deno's HTTP layer discards body bytes that arrive together with the FIN before the
        // handler reads them; a client cut mid-transfer leaves a gap, so leave one here too.
        await new Promise((res) => setTimeout(res, 150));
        await conn.closeWrite();
      }
    } catch (e) {
      // the server may answer and close before reading a body it rejects; read what it sent
      error = `write: ${(e as Error).message}`;
    }
    const buf = new Uint8Array(64 * 1024);
    while (true) {
      let n: number | null;
      try {
        n = await conn.read(buf);
      } catch (e) {
        error ??= `read: ${(e as Error).message}`;
        break;
      }
      if (n === null) break;
      received.push(buf.slice(0, n));
      if (parseResponse(concat(...received), r.method).complete) break;
    }
  } finally {
    clearTimeout(timer);
    try {
      conn.close();
    } catch { /* closed by the timer */ }
  }
  const { status, headers, body } = parseResponse(concat(...received), r.method);
  if (timedOut) error = "timed out";
  return { status, headers, body, error };
}
