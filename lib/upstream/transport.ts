// One HTTP exchange with an upstream: a connect timeout up to the response headers, redirects
// followed by hand (so credentials stay on their origin, and every hop is vetted by the
// outbound guard before it is contacted), the body guarded by body.ts.
// Everything that goes wrong leaves as UpstreamError.
import { concatBytes } from "../streams/mod.ts";
import { OutboundGuard, OutboundRefused } from "../http/mod.ts";
import { declaredLength, guardBody, networkReason, secs } from "./body.ts";
import {
  parseRetryAfter,
  UpstreamError,
  type UpstreamErrorKind,
  type UpstreamErrorOptions,
} from "./errors.ts";

export interface TransportConfig {
  /** the configured upstream URL, named in every error */
  upstream: string;
  /** how errors name the peer (default `upstream <url>`); a replication downstream names itself */
  label?: string;
  /** until the response headers of the last hop */
  connectTimeoutMs: number;
  /** the longest wait for the next body chunk */
  readTimeoutMs: number;
  maxRedirects: number;
  /** PEM of extra CAs (the upstream's `ca_bundle`, already read) */
  caCerts?: string[];
  /** `[global] outbound_allow` */
  outboundAllow?: readonly string[];
}

export interface SendRequest {
  /** GET and HEAD follow redirects; writes (a downstream's) never do: a body cannot be replayed */
  method: "GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE";
  url: URL;
  body?: BodyInit | null;
  headers?: Record<string, string>;
  authorization?: string | null;
  /** the only origin that receives `authorization`; a redirect elsewhere goes without it */
  authOrigin?: string | null;
  /** names the request in error messages: `GET manifest library/alpine:3` */
  what: string;
}

export interface Exchange {
  response: Response;
  /** the URL that answered, after redirects */
  url: URL;
  /** the body, guarded by the read timeout and the declared Content-Length */
  body(onEnd?: (error: UpstreamError | null) => void): ReadableStream<Uint8Array>;
  /** releases the connection without reading the body */
  discard(): Promise<void>;
}

const REDIRECTS = new Set([301, 302, 303, 307, 308]);

/** Origin and path only: presigned redirect URLs carry signatures in their query. */
export function describeUrl(u: URL): string {
  return `${u.origin}${u.pathname}`;
}

export class Transport {
  private readonly client: Deno.HttpClient | undefined;
  private readonly guard: OutboundGuard;

  constructor(readonly cfg: TransportConfig) {
    this.client = cfg.caCerts?.length ? Deno.createHttpClient({ caCerts: cfg.caCerts }) : undefined;
    this.guard = new OutboundGuard({ configured: [cfg.upstream], allow: cfg.outboundAllow });
  }

  close(): void {
    this.client?.close();
  }

  error(kind: UpstreamErrorKind, what: string, opts?: UpstreamErrorOptions): UpstreamError {
    return new UpstreamError(kind, this.cfg.upstream, what, { label: this.cfg.label, ...opts });
  }

  /** The error for a final response that is not a success. */
  statusError(what: string, res: Response): UpstreamError {
    const s = res.status;
    const head = `${what}: ${s}${res.statusText ? ` ${res.statusText}` : ""}`;
    if (s === 404) return this.error("not-found", head, { status: s });
    if (s === 401 || s === 403) return this.error("denied", head, { status: s });
    if (s === 429 || s >= 500) {
      const retryAfterSecs = parseRetryAfter(res.headers.get("retry-after"));
      const after = retryAfterSecs === undefined ? "" : ` (retry after ${retryAfterSecs} s)`;
      return this.error("unavailable", head + after, { status: s, retryAfterSecs });
    }
    return this.error("invalid", head, { status: s });
  }

  async send(req: SendRequest): Promise<Exchange> {
    const ctl = new AbortController();
    let timedOut = false;
    const expire = () => {
      timedOut = true;
      ctl.abort();
    };
    let timer = setTimeout(expire, this.cfg.connectTimeoutMs);
    // A streamed request body may take far longer than the connect timeout: each chunk sent
    // restarts it, so it bounds silences, and the wait for the answer after the last chunk.
    // After the last chunk the peer may still be writing and syncing what it received (a
    // downstream taking a large blob): the answer gets the read timeout, not the connect one.
    let body = req.body;
    if (body instanceof ReadableStream) {
      const rearm = (ms: number) => {
        clearTimeout(timer);
        timer = setTimeout(expire, ms);
      };
      const connect = this.cfg.connectTimeoutMs;
      const read = Math.max(this.cfg.readTimeoutMs, connect);
      body = body.pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform(chunk, c) {
            rearm(connect);
            c.enqueue(chunk);
          },
          flush: () => rearm(read),
        }),
      );
    }
    try {
      let url = req.url;
      const seen = new Set<string>([url.href]);
      for (let hop = 0;; hop++) {
        const headers = new Headers(req.headers);
        // Deno asks for gzip by default and then inflates, which makes Content-Length (and a
        // blob's size) disagree with the bytes read.
        headers.set("accept-encoding", "identity");
        if (req.authorization && req.authOrigin && url.origin === req.authOrigin) {
          headers.set("authorization", req.authorization);
        }
        await this.vet(url, hop, req.what, ctl.signal, () => timedOut);
        let res: Response;
        try {
          const init: RequestInit & { client?: Deno.HttpClient } = {
            method: req.method,
            headers,
            redirect: "manual",
            signal: ctl.signal,
            client: this.client,
          };
          if (body !== undefined && body !== null) init.body = body;
          res = await fetch(url, init);
        } catch (e) {
          if (timedOut) {
            throw this.error(
              "timeout",
              `${req.what}: no response within ${secs(this.cfg.connectTimeoutMs)} (${
                describeUrl(url)
              })`,
            );
          }
          throw this.error("unreachable", `${req.what}: ${describeUrl(url)}: ${networkReason(e)}`, {
            cause: e,
          });
        }
        if (!REDIRECTS.has(res.status) || (req.method !== "GET" && req.method !== "HEAD")) {
          clearTimeout(timer);
          return this.exchange(res, url, ctl, req.what);
        }
        await res.body?.cancel().catch(() => {});
        const location = res.headers.get("location");
        let next: URL;
        try {
          if (location === null) throw new Error("no Location");
          next = new URL(location, url);
        } catch {
          throw this.error("invalid", `${req.what}: ${res.status} without a usable Location`, {
            status: res.status,
          });
        }
        if (next.protocol !== "http:" && next.protocol !== "https:") {
          throw this.error("invalid", `${req.what}: redirect to a ${next.protocol} URL`);
        }
        if (seen.has(next.href)) {
          throw this.error("invalid", `${req.what}: redirect loop at ${describeUrl(next)}`);
        }
        if (hop + 1 > this.cfg.maxRedirects) {
          throw this.error(
            "invalid",
            `${req.what}: more than ${this.cfg.maxRedirects} redirects (last to ${
              describeUrl(next)
            })`,
          );
        }
        seen.add(next.href);
        url = next;
      }
    } catch (e) {
      clearTimeout(timer);
      ctl.abort();
      throw e;
    }
  }

  /**
   * A URL the config did not name (a redirect, a token realm) may not lead to metadata,
   * link-local or foreign loopback addresses. Refused counts as unreachable: a pull-through
   * serves its cached copy as for any upstream it cannot reach.
   */
  private async vet(
    url: URL,
    hop: number,
    what: string,
    signal: AbortSignal,
    timedOut: () => boolean,
  ): Promise<void> {
    try {
      await this.guard.check(url, signal);
    } catch (e) {
      if (e instanceof OutboundRefused) {
        throw this.error("unreachable", `${what}: ${hop > 0 ? "redirect to " : ""}${e.message}`, {
          cause: e,
        });
      }
      if (timedOut()) {
        throw this.error(
          "timeout",
          `${what}: no response within ${secs(this.cfg.connectTimeoutMs)} (${describeUrl(url)})`,
        );
      }
      throw this.error("unreachable", `${what}: ${describeUrl(url)}: ${networkReason(e)}`, {
        cause: e,
      });
    }
  }

  private exchange(res: Response, url: URL, ctl: AbortController, what: string): Exchange {
    return {
      response: res,
      url,
      body: (onEnd) =>
        guardBody(res, {
          readTimeoutMs: this.cfg.readTimeoutMs,
          what,
          error: (kind, what, opts) => this.error(kind, what, opts),
          abort: () => ctl.abort(),
          onEnd,
        }),
      discard: async () => {
        await res.body?.cancel().catch(() => {});
      },
    };
  }
}

/** Reads a whole (small) body, refusing more than `maxBytes`. */
export async function readBounded(
  t: Transport,
  ex: Exchange,
  maxBytes: number,
  what: string,
): Promise<Uint8Array> {
  const declared = declaredLength(ex.response);
  const tooBig = (n: string) =>
    t.error("invalid", `${what}: body of ${n} bytes exceeds the limit of ${maxBytes}`);
  if (declared !== null && declared > maxBytes) {
    await ex.discard();
    throw tooBig(String(declared));
  }
  const parts: Uint8Array[] = [];
  let n = 0;
  const reader = ex.body().getReader();
  while (true) {
    const r = await reader.read();
    if (r.done) break;
    n += r.value.byteLength;
    if (n > maxBytes) {
      await reader.cancel();
      throw tooBig(`more than ${maxBytes}`);
    }
    parts.push(r.value);
  }
  return concatBytes(parts, n);
}
