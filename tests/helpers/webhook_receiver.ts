// A webhook receiver for tests: a real HTTP server on 127.0.0.1 that records each delivery,
// verifies its X-Svc-Signature-256 against the token, and can refuse (status), hang, or go
// away entirely and come back on the same port.
import { createHmac, timingSafeEqual } from "node:crypto";

export interface Delivery {
  body: string;
  event: Record<string, unknown>;
  headers: Headers;
  /** null: no token configured here; else whether the signature matched */
  signatureOk: boolean | null;
}

export interface Receiver {
  url: string;
  port: number;
  deliveries: Delivery[];
  /** authorization requests (GET), with their headers */
  calls: Headers[];
  /** the status answered from now on (2xx accepts) */
  status: number;
  /** milliseconds to wait before answering */
  delayMs: number;
  /** an authorization request's status by its headers, when set (else `status`) */
  decide: ((h: Headers) => number) | null;
  /** stops listening: connections are refused until start() */
  stop(): Promise<void>;
  start(): void;
  /** waits until `pred` holds over the deliveries, or fails after `timeoutMs` */
  waitFor(pred: (d: Delivery[]) => boolean, timeoutMs?: number, what?: string): Promise<void>;
  ofKind(kind: string): Delivery[];
}

export function startReceiver(token: string | null = null, port = 0): Receiver {
  let server: Deno.HttpServer | null = null;
  const r: Receiver = {
    url: "",
    port,
    deliveries: [],
    calls: [],
    status: 200,
    delayMs: 0,
    decide: null,
    async stop() {
      await server?.shutdown();
      server = null;
    },
    start() {
      server = Deno.serve({
        hostname: "127.0.0.1",
        port: r.port,
        onListen: () => {},
      }, async (req) => {
        if (r.delayMs) await new Promise((res) => setTimeout(res, r.delayMs));
        if (req.method === "GET") {
          r.calls.push(req.headers);
          return new Response(null, { status: r.decide?.(req.headers) ?? r.status });
        }
        const body = await req.text();
        if (r.status >= 200 && r.status < 300) {
          let signatureOk: boolean | null = null;
          if (token !== null) {
            const want = `sha256=${createHmac("sha256", token).update(body).digest("hex")}`;
            const got = req.headers.get("x-svc-signature-256") ?? "";
            signatureOk = got.length === want.length &&
              timingSafeEqual(new TextEncoder().encode(got), new TextEncoder().encode(want));
          }
          r.deliveries.push({ body, event: JSON.parse(body), headers: req.headers, signatureOk });
        }
        return new Response(null, { status: r.status });
      });
      r.port = (server.addr as Deno.NetAddr).port;
      r.url = `http://127.0.0.1:${r.port}`;
    },
    async waitFor(pred, timeoutMs = 20_000, what = "deliveries") {
      const end = Date.now() + timeoutMs;
      while (!pred(r.deliveries)) {
        if (Date.now() > end) {
          throw new Error(
            `timed out waiting for ${what}; got ${
              JSON.stringify(r.deliveries.map((d) => [d.event.kind, d.event.namespace]))
            }`,
          );
        }
        await new Promise((res) => setTimeout(res, 50));
      }
    },
    ofKind: (kind) => r.deliveries.filter((d) => d.event.kind === kind),
  };
  r.start();
  return r;
}
