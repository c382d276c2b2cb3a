// HTTPS listener that can ask for client certificates. Deno.serve/Deno.listenTls cannot request
// them, so this one is node:https with `requestCert`, bridged to a fetch-style handler. Bodies
// stream both ways with backpressure: blob uploads of many GiB pass through here.
import { createServer, type Server } from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { TLSSocket } from "node:tls";
import type { TlsConfig } from "../lib/config/mod.ts";
import type { CertificateSubject, RefusedCertificate } from "../lib/auth/mod.ts";
import { log } from "../lib/log.ts";

export interface ConnInfo {
  remoteAddr: string;
  /**
   * subject of a client certificate that verified against the client CA bundle; why one that
   * was presented did not; null when none was
   */
  certificate: CertificateSubject | RefusedCertificate | null;
}

export interface ServeTlsOptions {
  hostname: string;
  port: number;
  tls: TlsConfig;
  /** `completed` settles once this request's answer was written or the connection closed */
  handler: (
    req: Request,
    conn: ConnInfo,
    completed: Promise<void>,
  ) => Promise<Response> | Response;
  onListen?: (addr: { hostname: string; port: number }) => void;
}

export interface TlsListener {
  port: number;
  /** stops accepting, lets in-flight requests finish (bounded), then drops every connection */
  close(): Promise<void>;
}

/** How long close() waits for in-flight requests before cutting their connections. */
const CLOSE_GRACE_MS = 5_000;
/** Bytes of request body held before the socket is paused. */
const REQUEST_BODY_HIGH_WATER = 256 * 1024;
/** Chunk size handed to default (non-BYOB) readers of a request body. */
const REQUEST_BODY_CHUNK = 64 * 1024;

const INTERNAL_ERROR_BODY = JSON.stringify({
  errors: [{ code: "INTERNAL_ERROR", message: "internal server error", detail: "" }],
});

export async function serveTls(opts: ServeTlsOptions): Promise<TlsListener> {
  const { tls } = opts;
  const wantCerts = tls.clientAuth !== "none";
  if (wantCerts && !tls.clientCaBundle) {
    throw new Error(`client_auth = "${tls.clientAuth}" needs a client CA bundle`);
  }
  const [key, cert, ca] = await Promise.all([
    Deno.readTextFile(tls.serverPrivateKey),
    Deno.readTextFile(tls.serverCertificateBundle),
    wantCerts ? Deno.readTextFile(tls.clientCaBundle!) : Promise.resolve(undefined),
  ]);
  const connInfo = new WeakMap<TLSSocket, ConnInfo>();
  const server: Server = createServer({
    key,
    cert,
    ...(wantCerts
      ? { requestCert: true, ca, rejectUnauthorized: tls.clientAuth === "required" }
      : {}),
    // Uploads of many GiB outlive node's default 5-minute whole-request timeout.
    requestTimeout: 0,
  }, (req, res) => {
    const socket = req.socket as TLSSocket;
    // Belt and braces: "required" must never serve a connection whose certificate failed.
    if (tls.clientAuth === "required" && !socket.authorized) {
      socket.destroy();
      return;
    }
    let conn = connInfo.get(socket);
    if (!conn) {
      conn = {
        remoteAddr: remoteAddr(socket),
        certificate: wantCerts ? peerSubject(socket) : null,
      };
      connInfo.set(socket, conn);
    }
    bridge(req, res, conn, opts).catch((e) => {
      log.error("tls listener: request failed", { error: errorText(e) });
      res.destroy();
    });
  });
  // A failed handshake (no or untrusted certificate under "required", plain HTTP, scanners)
  // concerns that connection only.
  server.on("tlsClientError", (_e: Error, s: TLSSocket) => s.destroy());

  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port, opts.hostname, () => {
      server.off("error", reject);
      resolve();
    });
  });
  server.on("error", (e) => log.error("tls listener error", { error: errorText(e) }));
  const addr = server.address();
  const port = typeof addr === "object" && addr ? addr.port : opts.port;
  opts.onListen?.({ hostname: opts.hostname, port });

  let closing: Promise<void> | null = null;
  return {
    port,
    close() {
      closing ??= new Promise<void>((resolve) => {
        const timer = setTimeout(() => server.closeAllConnections(), CLOSE_GRACE_MS);
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
        server.closeIdleConnections();
      });
      return closing;
    },
  };
}

function remoteAddr(socket: TLSSocket): string {
  const a = socket.remoteAddress ?? "";
  return a.startsWith("::ffff:") ? a.slice(7) : a;
}

/**
 * Only a verified chain becomes an identity. One presented but not verified (possible under
 * `client_auth = "optional"`) is refused with its reason, never served as anonymous.
 */
function peerSubject(socket: TLSSocket): CertificateSubject | RefusedCertificate | null {
  const c = socket.getPeerCertificate();
  const presented = !!c && c.raw instanceof Uint8Array && c.raw.byteLength > 0;
  if (!socket.authorized) return presented ? { refused: whyUnverified(socket, c.raw) } : null;
  if (!c || !c.subject) return null;
  const s = c.subject as unknown as Record<string, string | string[] | undefined>;
  const subject: CertificateSubject = {
    organizations: list(s.O),
    organizational_units: list(s.OU),
  };
  const cn = Array.isArray(s.CN) ? s.CN[0] : s.CN;
  if (cn !== undefined) subject.common_name = cn;
  return subject;
}

/**
 * The TLS library (rustls/webpki) verifies X.509 v3 certificates only and reports a v1 one as an
 * unverifiable signature; say what is wrong with it instead.
 */
function whyUnverified(socket: TLSSocket, der: Uint8Array): string {
  if (x509Version(der) === 1) {
    return "it is an X.509 v1 certificate (no extensions), which Wharf does not accept; reissue " +
      "it as v3 with extendedKeyUsage = clientAuth (docs/auth.md, mTLS)";
  }
  const code = socket.authorizationError;
  const why = code instanceof Error ? code.message : code ? String(code) : "unverified";
  return `it does not verify against [server.tls] client_ca_bundle (${why})`;
}

/**
 * The version field of a DER certificate: Certificate ::= SEQUENCE { tbsCertificate SEQUENCE {
 * [0] EXPLICIT version DEFAULT v1, ... } }. Null when the bytes are not shaped like one.
 */
function x509Version(der: Uint8Array): number | null {
  // Skips a tag and its length; returns the offset of the contents, or -1.
  const enter = (at: number, tag: number): number => {
    if (der[at] !== tag || at + 1 >= der.length) return -1;
    const first = der[at + 1];
    if (first < 0x80) return at + 2;
    const n = first & 0x7f;
    return n >= 1 && n <= 4 && at + 2 + n <= der.length ? at + 2 + n : -1;
  };
  const tbs = enter(0, 0x30);
  const inner = tbs < 0 ? -1 : enter(tbs, 0x30);
  if (inner < 0 || inner >= der.length) return null;
  if (der[inner] !== 0xa0) return 1;
  const int = enter(inner, 0xa0);
  if (int < 0 || der[int] !== 0x02 || der[int + 1] !== 1) return null;
  return der[int + 2] + 1;
}

function list(v: string | string[] | undefined): string[] {
  return v === undefined ? [] : Array.isArray(v) ? [...v] : [v];
}

function errorText(e: unknown): string {
  return e instanceof Error ? (e.stack ?? e.message) : String(e);
}

// Host names a request may put in its URL; anything else (userinfo, paths) falls back to ours.
const HOST_RE = /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

function requestUrl(req: IncomingMessage, opts: ServeTlsOptions, port: number): string | null {
  const host = req.headers.host && HOST_RE.test(req.headers.host)
    ? req.headers.host
    : `${opts.hostname.includes(":") ? `[${opts.hostname}]` : opts.hostname}:${port}`;
  let target = req.url ?? "/";
  if (!target.startsWith("/")) {
    // absolute-form (RFC 9112 §3.2.2): keep only path and query
    try {
      const u = new URL(target);
      target = u.pathname + u.search;
    } catch {
      return null;
    }
  }
  return `https://${host}${target}`;
}

async function bridge(
  req: IncomingMessage,
  res: ServerResponse,
  conn: ConnInfo,
  opts: ServeTlsOptions,
): Promise<void> {
  const aborted = new AbortController();
  // Deno.serve's info.completed, for this listener: the answer is written or the client left.
  const completed = new Promise<void>((resolve) => res.once("close", () => resolve()));
  // The handler's signal fires when the client goes away before the response is complete.
  res.on("close", () => {
    if (!res.writableFinished) aborted.abort(new Error("client disconnected"));
  });
  res.on("error", () => {});
  req.on("error", () => {});

  const method = req.method ?? "GET";
  const url = requestUrl(req, opts, req.socket.localPort ?? opts.port);
  let request: Request;
  try {
    if (url === null) throw new Error("unparseable request target");
    const headers = new Headers();
    const raw = req.rawHeaders;
    for (let i = 0; i + 1 < raw.length; i += 2) headers.append(raw[i], raw[i + 1]);
    const hasBody = method !== "GET" && method !== "HEAD" &&
      (req.headers["content-length"] !== undefined ||
        req.headers["transfer-encoding"] !== undefined);
    // `duplex` (required for stream bodies by the fetch spec) is missing from the dom lib here.
    const init = {
      method,
      headers,
      body: hasBody ? bodyStream(req, res, aborted) : null,
      signal: aborted.signal,
      duplex: "half",
    };
    request = new Request(url, init as RequestInit);
  } catch {
    req.resume();
    res.writeHead(400, { "content-type": "application/json", "content-length": 0 }).end();
    return;
  }

  let response: Response;
  try {
    response = await opts.handler(request, conn, completed);
  } catch (e) {
    log.error("unhandled handler error", { error: errorText(e) });
    if (res.headersSent || res.destroyed) {
      res.destroy();
      return;
    }
    response = new Response(INTERNAL_ERROR_BODY, {
      status: 500,
      headers: { "content-type": "application/json" },
    });
  }
  await writeResponse(res, response, method === "HEAD");
}

/**
 * The request body as a byte stream, so a BYOB reader can refill one buffer (what the blob store
 * does); node's chunks are copied out because they may share a pooled ArrayBuffer.
 */
function bodyStream(
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

async function writeResponse(res: ServerResponse, response: Response, head: boolean) {
  const headers: Record<string, string | string[]> = {};
  for (const [k, v] of response.headers) if (k !== "set-cookie") headers[k] = v;
  const cookies = response.headers.getSetCookie();
  if (cookies.length) headers["set-cookie"] = cookies;
  const status = response.status;
  const body = response.body;
  const bodyless = status === 204 || status === 304 || status < 200;
  if (res.destroyed || head || bodyless || body === null) {
    await body?.cancel().catch(() => {});
    if (res.destroyed) return;
    if (!head && !bodyless && headers["content-length"] === undefined) {
      headers["content-length"] = "0";
    }
    writeHead(res, response, headers).end();
    return;
  }
  const reader = body.getReader();
  let first: Uint8Array | null = null;
  if (headers["content-length"] === undefined && headers["transfer-encoding"] === undefined) {
    // A body that fits one chunk (JSON, errors) goes out with Content-Length in a single write
    // instead of chunked framing.
    try {
      const a = await reader.read();
      const b = a.done ? a : await reader.read();
      if (b.done) {
        const bytes = a.done ? new Uint8Array(0) : a.value;
        headers["content-length"] = String(bytes.byteLength);
        if (!res.destroyed) writeHead(res, response, headers).end(bytes);
        return;
      }
      if (!a.done) first = a.value;
      writeHead(res, response, headers);
      if (first && !res.write(first)) await drained(res);
      first = b.value;
    } catch (e) {
      await reader.cancel().catch(() => {});
      if (res.destroyed) return;
      if (res.headersSent) {
        res.destroy();
        return;
      }
      log.error("response body failed", { error: errorText(e) });
      res.writeHead(500, {
        "content-type": "application/json",
        "content-length": String(new TextEncoder().encode(INTERNAL_ERROR_BODY).byteLength),
      }).end(INTERNAL_ERROR_BODY);
      return;
    }
  } else {
    writeHead(res, response, headers);
  }
  try {
    if (first && !res.write(first)) await drained(res);
    for (;;) {
      if (res.destroyed) {
        await reader.cancel().catch(() => {});
        return;
      }
      const { done, value } = await reader.read();
      if (done) break;
      if (!res.write(value)) await drained(res);
    }
    res.end();
  } catch (e) {
    // Headers are out: the only honest signal left is cutting the connection.
    if (!res.destroyed) log.error("response body failed", { error: errorText(e) });
    await reader.cancel().catch(() => {});
    res.destroy();
  }
}

function writeHead(
  res: ServerResponse,
  response: Response,
  headers: Record<string, string | string[]>,
): ServerResponse {
  return response.statusText
    ? res.writeHead(response.status, response.statusText, headers)
    : res.writeHead(response.status, headers);
}

function drained(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.on("drain", done);
    res.on("close", done);
  });
}
