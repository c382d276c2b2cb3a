// Rate limits with the limiter's reads batched (docs/operations.md "Rate limits", "KV cost per
// request"): two `serve` processes on one KV file, many anonymous clients behind a trusted proxy
// pulling at once. Each process reads stale buckets together (getManys of up to ten keys), and
// every client is still held within the documented bound: P × capacity across P processes in
// one interval, then refused on both once the takes are settled.
import assert from "node:assert/strict";
import { req, serverTestOpts } from "../helpers/api.ts";
import { pushImage, startServer, type TestServer } from "../helpers/server.ts";

const CLIENTS = 15;
const PULLS_EACH = 6;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function pull(s: TestServer, ip: string): Promise<number> {
  const r = await req(s, "/v2/pub/app/manifests/v1", {
    headers: { accept: "application/vnd.oci.image.manifest.v1+json", "x-forwarded-for": ip },
  });
  await r.body?.cancel();
  return r.status;
}

async function limiterGets(s: TestServer): Promise<number> {
  const m = await (await req(s, "/metrics")).text();
  return Number(m.match(/wharf_rate_limit_kv_operations_total\{op="gets"\} (\d+)/)?.[1] ?? 0);
}

Deno.test({
  name: "many clients on two processes: batched reads, each client within 2 × pulls_per_hour",
  ...serverTestOpts,
  async fn() {
    const config = `[global.rate_limit]\npulls_per_hour = 2\nsync_interval_ms = 100\n`;
    const server = 'trusted_proxies = ["127.0.0.1/32"]';
    const a = await startServer({ config, server });
    let b: TestServer | null = null;
    try {
      b = await startServer({ config, server, dataDir: a.dataDir });
      await pushImage(a.url, "pub/app", "v1");
      const ip = (i: number) => `198.51.100.${i + 1}`;
      const statuses = await Promise.all(
        Array.from(
          { length: CLIENTS * PULLS_EACH },
          (_, i) => pull(i % 2 ? a : b!, ip(i % CLIENTS)).then((st) => ({ c: i % CLIENTS, st })),
        ),
      );
      assert.equal(statuses.filter((x) => x.st !== 200 && x.st !== 429).length, 0);
      for (let c = 0; c < CLIENTS; c++) {
        const ok = statuses.filter((x) => x.c === c && x.st === 200).length;
        assert.ok(ok >= 2 && ok <= 4, `client ${ip(c)}: ${ok} pulls admitted`);
      }
      // Fewer reads than the buckets each process had to load (one per client per process).
      const gets = await limiterGets(a) + await limiterGets(b);
      assert.ok(gets < 2 * CLIENTS, `${gets} limiter reads for ${CLIENTS} clients × 2 processes`);
      await sleep(400);
      // Settled: every client is refused on both processes.
      for (const s of [a, b]) {
        for (let c = 0; c < CLIENTS; c++) assert.equal(await pull(s, ip(c)), 429, ip(c));
      }
    } finally {
      await b?.stop();
      await a.stop();
      await Deno.remove(a.dataDir, { recursive: true }).catch(() => {});
    }
  },
});
