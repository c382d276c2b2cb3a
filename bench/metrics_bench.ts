// Serves Wharf in-process with the metrics wiring on or off, for measuring its per-request cost
// with wrk. Run: deno run -A --unstable-kv bench/metrics_bench.ts on|off [blobMiB]
// Prints `ready <port> <manifest path> <blob path>` once an image is pushed; serves until killed.
import { defaultConfig } from "../lib/config/mod.ts";
import { instrumentKv, openMetadata } from "../lib/kv/mod.ts";
import { countUploadSessions } from "../lib/metadata/mod.ts";
import { type BlobStore, FsBlobStore, InstrumentedBlobStore } from "../lib/storage/mod.ts";
import { Metrics } from "../lib/metrics/mod.ts";
import { Registry } from "../lib/registry/mod.ts";
import { allWriteEffects, httpParts } from "../lib/services/mod.ts";
import { Authenticator, ClientIpResolver } from "../lib/auth/mod.ts";
import { PolicySet } from "../lib/policy/mod.ts";
import { createApp } from "../routes/app.ts";
import { pushImage } from "../tests/helpers/server.ts";

const on = Deno.args[0] === "on";
const blobMiB = Number(Deno.args[1] ?? "64");
const dir = await Deno.makeTempDir({ prefix: "wharf-metrics-bench-" });
const cfg = defaultConfig();
const fs = new FsBlobStore(`${dir}/blobs`);
await fs.init();
const rawKv = await openMetadata(`${dir}/kv`);
const metrics = on ? new Metrics() : undefined;
const store: BlobStore = metrics ? new InstrumentedBlobStore(fs, metrics.observeBlobStore) : fs;
const kv = metrics ? instrumentKv(rawKv, metrics.observeKv) : rawKv;
metrics?.countUploadSessionsWith(() => countUploadSessions(rawKv));
const registry = new Registry(cfg, kv, store, { effects: allWriteEffects(cfg) });
const app = createApp({
  registry,
  policies: new PolicySet(cfg),
  authenticator: new Authenticator(cfg),
  clientIp: new ClientIpResolver([]),
  metrics,
  ...httpParts({ cfg, kv, jobs: registry.jobs, metrics }),
});
const server = Deno.serve(
  { hostname: "127.0.0.1", port: 0, onListen: () => {} },
  (req, info) => app.fetch(req, { remoteAddr: info.remoteAddr.hostname, certificate: null }),
);
const url = `http://127.0.0.1:${server.addr.port}`;
const layer = new Uint8Array(blobMiB * 1024 * 1024).map((_, i) => i & 0xff);
const t0 = performance.now();
const img = await pushImage(url, "bench/app", "v1", { layer });
const pushMs = Math.round(performance.now() - t0);
console.log(
  `ready ${server.addr.port} /v2/bench/app/manifests/v1 /v2/bench/app/blobs/${img.layer} ${pushMs}`,
);
Deno.addSignalListener("SIGTERM", async () => {
  await server.shutdown();
  rawKv.close();
  await Deno.remove(dir, { recursive: true });
  Deno.exit(0);
});
