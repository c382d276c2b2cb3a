// Keep-alive HTTP/1.1 POSTs for webhook deliveries, written here instead of using fetch():
// fetch costs the sender ~0.1 ms of CPU per request (Request, Headers and Response objects,
// hyper's client on the main thread) against ~0.02 ms for one prebuilt buffer written to a
// pooled connection and an answer head read back (3,000 POSTs to a receiver in another
// process, /proc CPU time: 0.097-0.110 against 0.020-0.027 ms). A delivery is most of what a
// webhook costs per event, so this is its overhead on pushes (bench/events_bench.ts).
//
// It speaks only what a delivery needs: one POST with a Content-Length body, and the answer's
// status. The answer's body is never read: one that arrived with the head, whole and with its
// Content-Length, leaves the connection for the next delivery; anything else (chunked, no
// length, still on its way) closes the connection instead. Interim 1xx answers are skipped. A pooled connection
// the receiver closed while idle gets one retry on a fresh one (deliveries are at least once).
// With a proxy set in the environment, deliver() uses fetch(), which honours it.

export class PostError extends Error {
  constructor(message: string, readonly timedOut: boolean) {
    super(message);
  }
}

/** Closed before a byte of the answer arrived, on a connection reused from the pool. */
class StaleConnection extends Error {}

/** Below the 5 s keep-alive of Node's http server, the shortest common default. */
const IDLE_MS = 4_000;
const POOL_MAX = 16;
const HEAD_MAX = 64 * 1024;

const encoder = new TextEncoder();
const latin1 = new TextDecoder("latin1");

interface Idle {
  conn: Deno.Conn;
  timer: ReturnType<typeof setTimeout>;
}

interface Answer {
  status: number;
  reusable: boolean;
}

export interface PostClientOptions {
  /** extra trust anchors for https receivers (tests); the default store otherwise */
  caCerts?: string[];
}

export class PostClient {
  private readonly idle = new Map<string, Idle[]>();

  constructor(private readonly options: PostClientOptions = {}) {}

  /** POSTs `body` to `url`; resolves to the answer's status, whatever it is. */
  async post(
    url: string,
    headers: Record<string, string>,
    body: string,
    timeoutMs: number,
  ): Promise<number> {
    const u = new URL(url);
    if (u.protocol !== "http:" && u.protocol !== "https:") {
      throw new PostError(`${u.protocol} is not http(s)`, false);
    }
    const request = requestBytes(u, headers, body);
    const key = `${u.protocol}//${u.host}`;
    let current: Deno.Conn | null = null;
    let expired = false;
    let expire!: (e: Error) => void;
    const deadline = new Promise<never>((_, reject) => expire = reject);
    deadline.catch(() => {});
    const timer = setTimeout(() => {
      expired = true;
      close(current);
      expire(new PostError(`no answer within ${timeoutMs} ms`, true));
    }, timeoutMs);
    try {
      for (let attempt = 0;; attempt++) {
        const pooled = attempt === 0 ? this.take(key) : null;
        const conn = pooled ?? await Promise.race([this.connect(u, () => expired), deadline]);
        current = conn;
        try {
          await Promise.race([writeAll(conn, request, pooled !== null), deadline]);
          const answer = await Promise.race([readAnswer(conn, pooled !== null), deadline]);
          if (answer.reusable && !expired) this.give(key, conn);
          else close(conn);
          return answer.status;
        } catch (e) {
          close(conn);
          if (expired) throw new PostError(`no answer within ${timeoutMs} ms`, true);
          if (e instanceof StaleConnection) continue;
          throw e instanceof PostError ? e : new PostError((e as Error).message, false);
        }
      }
    } catch (e) {
      if (e instanceof PostError) throw e;
      throw new PostError((e as Error).message, false);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Closes every idle connection. */
  close(): void {
    for (const list of this.idle.values()) {
      for (const i of list) {
        clearTimeout(i.timer);
        close(i.conn);
      }
    }
    this.idle.clear();
  }

  private async connect(u: URL, expired: () => boolean): Promise<Deno.Conn> {
    const hostname = u.hostname.replace(/^\[(.*)\]$/, "$1");
    const port = Number(u.port) || (u.protocol === "https:" ? 443 : 80);
    let conn: Deno.Conn;
    if (u.protocol === "https:") {
      conn = await Deno.connectTls({ hostname, port, caCerts: this.options.caCerts });
    } else {
      const tcp = await Deno.connect({ hostname, port });
      tcp.setNoDelay(true);
      conn = tcp;
    }
    // The deadline already answered the caller: nobody will use this connection.
    if (expired()) {
      close(conn);
      throw new PostError("connected after the deadline", true);
    }
    return conn;
  }

  private take(key: string): Deno.Conn | null {
    const i = this.idle.get(key)?.pop();
    if (!i) return null;
    clearTimeout(i.timer);
    return i.conn;
  }

  private give(key: string, conn: Deno.Conn): void {
    let list = this.idle.get(key);
    if (!list) this.idle.set(key, list = []);
    if (list.length >= POOL_MAX) return close(conn);
    const entry: Idle = {
      conn,
      timer: setTimeout(() => {
        const at = list.indexOf(entry);
        if (at >= 0) list.splice(at, 1);
        close(conn);
      }, IDLE_MS),
    };
    Deno.unrefTimer(entry.timer as unknown as number);
    list.push(entry);
  }
}

function close(conn: Deno.Conn | null): void {
  try {
    conn?.close();
  } catch { /* already closed */ }
}

function requestBytes(u: URL, headers: Record<string, string>, body: string): Uint8Array {
  const payload = encoder.encode(body);
  let head = `POST ${u.pathname}${u.search} HTTP/1.1\r\nHost: ${u.host}\r\n`;
  for (const [k, v] of Object.entries(headers)) {
    if (/[\r\n:]/.test(k) || /[\r\n]/.test(v)) throw new PostError(`bad header ${k}`, false);
    head += `${k}: ${v}\r\n`;
  }
  head += `Content-Length: ${payload.length}\r\n\r\n`;
  const h = encoder.encode(head);
  const out = new Uint8Array(h.length + payload.length);
  out.set(h);
  out.set(payload, h.length);
  return out;
}

async function writeAll(conn: Deno.Conn, bytes: Uint8Array, pooled: boolean): Promise<void> {
  try {
    for (let off = 0; off < bytes.length;) off += await conn.write(bytes.subarray(off));
  } catch (e) {
    // The receiver closed the idle connection and the kernel said so on the write.
    if (pooled) throw new StaleConnection((e as Error).message);
    throw e;
  }
}

async function readAnswer(conn: Deno.Conn, pooled: boolean): Promise<Answer> {
  let buf = new Uint8Array(4096);
  let have = 0;
  let start = 0; // where the current answer's head begins (after skipped 1xx answers)
  let received = false;
  for (;;) {
    const text = latin1.decode(buf.subarray(start, have));
    const end = text.indexOf("\r\n\r\n");
    if (end < 0) {
      if (have - start >= HEAD_MAX) throw new PostError("answer head over 64 KiB", false);
      if (have === buf.length) {
        const bigger = new Uint8Array(Math.min(buf.length * 2, HEAD_MAX + 4096));
        bigger.set(buf.subarray(start, have));
        have -= start;
        start = 0;
        buf = bigger;
      }
      let n: number | null;
      try {
        n = await conn.read(buf.subarray(have));
      } catch (e) {
        if (pooled && !received) throw new StaleConnection((e as Error).message);
        throw e;
      }
      if (n === null) {
        if (pooled && !received) throw new StaleConnection("closed while idle");
        throw new PostError(
          received ? "connection closed mid-answer" : "connection closed without an answer",
          false,
        );
      }
      received = true;
      have += n;
      continue;
    }
    const lines = text.slice(0, end).split("\r\n");
    const m = /^HTTP\/1\.([01]) ([1-5][0-9]{2})(?: |$)/.exec(lines[0]);
    if (!m) {
      throw new PostError(`malformed answer: ${JSON.stringify(lines[0].slice(0, 80))}`, false);
    }
    const status = Number(m[2]);
    const bodyStart = start + end + 4;
    if (status < 200 && status !== 101) {
      start = bodyStart; // 100 Continue, 103 Early Hints: the real answer follows
      continue;
    }
    const h = new Map<string, string>();
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(":");
      if (colon <= 0) throw new PostError("malformed answer header", false);
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      // Two different lengths make the body's end unknown: the connection is not reused.
      const prev = h.get(name);
      h.set(name, prev === undefined || prev === value ? value : "\0conflict");
    }
    const reusable = m[1] === "1" && status !== 101 &&
      !/(^|,)\s*close\s*(,|$)/i.test(h.get("connection") ?? "") &&
      !h.has("transfer-encoding");
    const leftover = have - bodyStart;
    if (status === 204 || status === 304) return { status, reusable: reusable && leftover === 0 };
    // Only a body that came with the head keeps the connection: waiting for the rest of one
    // would hold the delivery for bytes nobody reads.
    const length = h.get("content-length");
    return { status, reusable: reusable && length !== undefined && Number(length) === leftover };
  }
}
