// Per-request cost of the metrics wiring (middleware + KV/blob-store decorators), measured
// in-process through app.fetch so other load on the machine affects both sides alike: the two
// apps share one KV file and blob dir, and batches alternate between them.
// Run: deno run -A --unstable-kv bench/metrics_overhead.ts
import { defaultConfig } from "../lib/config/mod.ts";
import { instrumentKv, openMetadata } from "../lib/kv/mod.ts";
import { type BlobStore, FsBlobStore, InstrumentedBlobStore } from "../lib/storage/mod.ts";
import { Metrics } from "../lib/metrics/mod.ts";
import { Registry } from "../lib/registry/mod.ts";
import { allWriteEffects, httpParts } from "../lib/services/mod.ts";
import { Authenticator, ClientIpResolver } from "../lib/auth/mod.ts";
import { PolicySet } from "../lib/policy/mod.ts";
import { createApp } from "../routes/app.ts";

const dir = await Deno.makeTempDir({ prefix: "wharf-metrics-overhead-" });
const cfg = defaultConfig();
const fs = new FsBlobStore(`${dir}/blobs`);
await fs.init();
const kv = await openMetadata(`${dir}/kv`);
const metrics = new Metrics();
const effects = allWriteEffects(cfg);
const base = {
  policies: new PolicySet(cfg),
  authenticator: new Authenticator(cfg),
  clientIp: new ClientIpResolver([]),
};
/** An app over `kv` and `store`, with `appMetrics` as its /metrics and middleware. */
function appOver(appKv: Deno.Kv, store: BlobStore, appMetrics?: Metrics) {
  const registry = new Registry(cfg, appKv, store, { effects });
  return createApp({
    ...base,
    registry,
    metrics: appMetrics,
    ...httpParts({ cfg, kv: appKv, jobs: registry.jobs, metrics: appMetrics }),
  });
}
const mwOnly = appOver(kv, fs, new Metrics());
const instrumented = () =>
  [
    instrumentKv(kv, metrics.observeKv),
    new InstrumentedBlobStore(fs, metrics.observeBlobStore),
  ] as const;
const storesOnly = appOver(...instrumented());
const off = appOver(kv, fs);
const on = appOver(...instrumented(), metrics);
const env = { remoteAddr: "127.0.0.1", certificate: null };
const U = "http://wharf.test";

async function put(path: string, body: Uint8Array, type = "application/octet-stream") {
  const r = await off.fetch(
    new Request(U + path, {
      method: path.includes("manifests") ? "PUT" : "POST",
      body: body as BodyInit,
      headers: { "content-type": type, "content-length": String(body.length) },
    }),
    env,
  );
  await r.body?.cancel();
  if (r.status !== 201) throw new Error(`${path}: ${r.status}`);
}
const hex = async (b: Uint8Array) =>
  Array.from(
    new Uint8Array(await crypto.subtle.digest("SHA-256", b as BufferSource)),
    (x) => x.toString(16).padStart(2, "0"),
  ).join("");
const enc = new TextEncoder();
const cfgBlob = enc.encode('{"architecture":"amd64","os":"linux"}');
const layer = new Uint8Array(256 * 1024).map((_, i) => i & 0xff);
const cd = `sha256:${await hex(cfgBlob)}`;
const ld = `sha256:${await hex(layer)}`;
await put(`/v2/b/app/blobs/uploads/?digest=${cd}`, cfgBlob);
await put(`/v2/b/app/blobs/uploads/?digest=${ld}`, layer);
const manifest = enc.encode(JSON.stringify({
  schemaVersion: 2,
  mediaType: "application/vnd.oci.image.manifest.v1+json",
  config: {
    mediaType: "application/vnd.oci.image.config.v1+json",
    digest: cd,
    size: cfgBlob.length,
  },
  layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar", digest: ld, size: layer.length }],
}));
await put("/v2/b/app/manifests/v1", manifest, "application/vnd.oci.image.manifest.v1+json");

async function batch(app: typeof on, path: string, n: number): Promise<number> {
  const t = performance.now();
  for (let i = 0; i < n; i++) {
    const r = await app.fetch(new Request(U + path), env);
    await r.arrayBuffer();
  }
  return (performance.now() - t) * 1000 / n;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
for (
  const [what, path, n] of [
    ["manifest GET", "/v2/b/app/manifests/v1", 2000],
    ["256 KiB blob GET", `/v2/b/app/blobs/${ld}`, 400],
    ["404 manifest GET", "/v2/b/app/manifests/nope", 2000],
  ] as const
) {
  await batch(off, path, n / 4);
  await batch(on, path, n / 4);
  const apps = { off, on, "middleware only": mwOnly, "stores only": storesOnly };
  const times = new Map<string, number[]>();
  for (let round = 0; round < 7; round++) {
    for (const [k, app] of Object.entries(apps)) {
      times.set(k, [...times.get(k) ?? [], await batch(app, path, n)]);
    }
  }
  const ma = median(times.get("off")!);
  const parts = [...times].map(([k, v]) => {
    const m = median(v);
    return `${k} ${m.toFixed(1)} µs` + (k === "off" ? "" : ` (+${(m - ma).toFixed(1)})`);
  });
  console.log(`${what}: ${parts.join(", ")}`);
}
kv.close();
await Deno.remove(dir, { recursive: true });
