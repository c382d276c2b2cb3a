// GET /metrics, and the edge's share of the instruments: per-request count, latency, in-flight
// and body bytes, and authentication attempts.
import { countingByteStream, countingStream, type Metrics } from "../lib/metrics/mod.ts";
import type { AuthResult } from "../lib/auth/mod.ts";
import { RegistryError } from "../lib/oci/mod.ts";
import type { RequestScope } from "./scope.ts";

/**
 * Bodies with a Content-Length are counted by it as the headers leave: wrapping them turns
 * Deno's static-body fast path (manifests: ~30% req/s lost) and its native file pipe (blobs)
 * into JS streams. The cost is that a client disconnecting mid-blob counts as if it had read
 * everything. Undeclared bodies are counted as they actually stream.
 */
/** The action the catch-all resolved, for the label; unparsable requests stay "none". */
const actionOf = new WeakMap<Request, string>();
/** Per-request body byte sink, read by `countedBody` when a handler takes the body. */
const bodySink = new WeakMap<Request, (n: number) => void>();

export function noteAction(req: Request, action: string): void {
  actionOf.set(req, action);
}

/**
 * Wraps the app's fetch to count requests by action/method/status, their latency and
 * in-flight, errors included (the app's error mapper always yields a Response). Latency and
 * in-flight end when the response headers are ready: a streamed body runs at the client's pace
 * and is measured in bytes instead (never buffered). A wrapper rather than a Hono middleware
 * keeps the instrumentation outside routing; measured under wrk, the two cost the same (all of
 * /metrics: roughly 20-30% of manifest GET req/s, see bench/README.md).
 */
export function instrumentFetch<E>(
  m: Metrics,
  fetch: (req: Request, env: E) => Response | Promise<Response>,
): (req: Request, env: E) => Promise<Response> {
  return async (req, env) => {
    const t = performance.now();
    m.requestStarted();
    bodySink.set(req, (n) => m.bytesIn(n));
    let status = 500;
    try {
      let res = await fetch(req, env);
      status = res.status;
      if (res.body !== null && req.method !== "HEAD") {
        const declared = Number(res.headers.get("content-length") ?? NaN);
        if (Number.isFinite(declared)) {
          m.bytesOut(declared);
        } else {
          res = new Response(countingStream(res.body, (n) => m.bytesOut(n)), res);
        }
      }
      return res;
    } finally {
      m.requestFinished(
        actionOf.get(req) ?? "none",
        req.method,
        status,
        (performance.now() - t) / 1000,
      );
    }
  };
}

/** The request body, counted into the request's byte sink when metrics are on. */
export function countedBody(req: Request): ReadableStream<Uint8Array> | null {
  const body = req.body;
  const sink = bodySink.get(req);
  return body && sink ? countingByteStream(body, sink) : body;
}

/** Counts one authentication: `auth` when it succeeded, else the failing header's scheme. */
export function countAuth(
  m: Metrics | undefined,
  auth: AuthResult | null,
  authorization: string | null,
): void {
  if (!m) return;
  if (auth) {
    m.authAttempt(auth.method, auth.method === "anonymous" ? "anonymous" : "ok");
    return;
  }
  const scheme = /^\s*([A-Za-z]+)/.exec(authorization ?? "")?.[1].toLowerCase();
  m.authAttempt(scheme === "basic" || scheme === "bearer" ? scheme : "other", "failed");
}

export async function metricsHandler(
  { services: { metrics: m }, head }: RequestScope,
): Promise<Response> {
  if (!m) throw new RegistryError("NAME_UNKNOWN", "metrics are not enabled");
  const headers = { "Content-Type": m.contentType, "Cache-Control": "no-store" };
  if (head) return new Response(null, { status: 200, headers });
  return new Response(await m.render(), { status: 200, headers });
}
