// One request of the TLS listener bridged from node:http to a fetch-style handler and back: the
// Request built (its URL, headers and streamed body), the Response written with backpressure.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { TlsConfig } from "../lib/config/mod.ts";
import type { CertificateSubject, RefusedCertificate } from "../lib/auth/mod.ts";
import { log } from "../lib/log.ts";
import { bodyStream } from "./tls_request_body.ts";

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

const INTERNAL_ERROR_BODY = JSON.stringify({
  errors: [{ code: "INTERNAL_ERROR", message: "internal server error", detail: "" }],
});

export function errorText(e: unknown): string {
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

export async function bridge(
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
