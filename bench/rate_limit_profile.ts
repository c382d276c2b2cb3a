// Where a pull's server CPU goes with rate limits on: a V8 CPU profile of the serving process
// (started with WHARF_SERVER_INSPECT, as bench/hostile_profile.ts) while CONCURRENCY clients
// pull a one-layer image, printed as self time per function and the inclusive time of the
// rate-limit step (routes/rate_limit.ts and lib/ratelimit/) against the whole profile.
//
// Run: WHARF_SERVER_INSPECT=127.0.0.1:9339 deno run -A --unstable-kv bench/rate_limit_profile.ts \
//        [--many] [--off] [--secs N]
import { sha256Hex, startServer } from "../tests/helpers/server.ts";
import { openInspector, type ProfileNode } from "./inspector.ts";

const many = Deno.args.includes("--many");
const off = Deno.args.includes("--off");
const secsArg = Deno.args.indexOf("--secs");
const SECS = secsArg >= 0 ? Number(Deno.args[secsArg + 1]) : 8;
const CONCURRENCY = 16;
const IPS = 1000;
const inspect = Deno.env.get("WHARF_SERVER_INSPECT");
if (!inspect) throw new Error("set WHARF_SERVER_INSPECT=127.0.0.1:<port>");

const s = await startServer({
  unchecked: true,
  config: off ? "" : `[global.rate_limit]
pulls_per_hour = 1000000000
requests_per_second = 1000000
burst = 1000000000
`,
  server: many ? 'trusted_proxies = ["127.0.0.1/32"]' : undefined,
});
try {
  const LAYER = new Uint8Array(64 * 1024).map((_, i) => (i * 31) & 0xff);
  const config = new TextEncoder().encode('{"architecture":"amd64","os":"linux"}');
  const blobs: string[] = [];
  for (const data of [config, LAYER]) {
    const digest = `sha256:${await sha256Hex(data)}`;
    const r = await fetch(`${s.url}/v2/bench/app/blobs/uploads/?digest=${digest}`, {
      method: "POST",
      body: data as BodyInit,
    });
    await r.body?.cancel();
    blobs.push(digest);
  }
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: blobs[0], size: 37 },
    layers: [{
      mediaType: "application/vnd.oci.image.layer.v1.tar+gzip",
      digest: blobs[1],
      size: LAYER.length,
    }],
  });
  const put = await fetch(`${s.url}/v2/bench/app/manifests/v1`, {
    method: "PUT",
    body: manifest,
    headers: { "content-type": "application/vnd.oci.image.manifest.v1+json" },
  });
  await put.body?.cancel();
  let n = 0;
  const pull = async () => {
    const h: Record<string, string> = { accept: "application/vnd.oci.image.manifest.v1+json" };
    const i = n++;
    if (many) h["x-forwarded-for"] = `10.${(i % IPS) >> 8}.${(i % IPS) & 0xff}.1`;
    for (const p of ["manifests/v1", `blobs/${blobs[0]}`, `blobs/${blobs[1]}`]) {
      const r = await fetch(`${s.url}/v2/bench/app/${p}`, { headers: h });
      await r.arrayBuffer();
      if (r.status !== 200) throw new Error(`${p}: ${r.status}`);
    }
  };
  const drive = async (secs: number) => {
    const until = performance.now() + secs * 1000;
    await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < until) await pull();
    }));
  };
  await drive(2);
  const inspector = await openInspector(inspect);
  const ops = async () => {
    const t = await (await fetch(`${s.url}/metrics`)).text();
    const get = (op: string) =>
      Number(
        t.match(new RegExp(`wharf_rate_limit_kv_operations_total\\{op="${op}"\\} (\\d+)`))?.[1] ??
          0,
      );
    return { gets: get("gets"), commits: get("commits") };
  };
  const ops0 = await ops();
  await inspector.startProfile(200);
  const n0 = n;
  await drive(SECS);
  const profile = await inspector.stopProfile();
  inspector.close();
  const pulls = n - n0;
  const ops1 = await ops();
  const byId = new Map<number, ProfileNode>(profile.nodes.map((x) => [x.id, x]));
  const parent = new Map<number, number>();
  for (const x of profile.nodes) for (const c of x.children ?? []) parent.set(c, x.id);
  const name = (x: ProfileNode) =>
    `${x.callFrame.functionName || "(anon)"} ${
      x.callFrame.url.replace(/.*\/work\/main\//, "")
    }:${x.callFrame.lineNumber}`;
  const self = new Map<string, number>();
  const incl = new Map<string, number>();
  let busy = 0;
  profile.samples.forEach((nid, i) => {
    const dt = profile.timeDeltas[i] ?? 0;
    const x = byId.get(nid)!;
    const f = x.callFrame.functionName;
    if (f !== "(idle)" && f !== "(program)") busy += dt;
    self.set(name(x), (self.get(name(x)) ?? 0) + dt);
    // Inclusive: each distinct ancestor frame once per sample.
    const seen = new Set<string>();
    for (let c: number | undefined = nid; c !== undefined; c = parent.get(c)) {
      const k = name(byId.get(c)!);
      if (seen.has(k)) continue;
      seen.add(k);
      incl.set(k, (incl.get(k) ?? 0) + dt);
    }
  });
  console.log(
    `${pulls} pulls in ${SECS} s (${(pulls / SECS).toFixed(0)}/s); busy ${
      (busy / 1000).toFixed(0)
    } ms = ${(busy / pulls).toFixed(1)} µs per pull (load ${Deno.loadavg()[0].toFixed(1)})`,
  );
  console.log(
    `limiter KV per pull: ${((ops1.gets - ops0.gets) / pulls).toFixed(3)} getMany, ${
      ((ops1.commits - ops0.commits) / pulls).toFixed(3)
    } commits`,
  );
  console.log("\nself time, top 30:");
  const top = [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, 30);
  for (const [k, us] of top) console.log(`${(us / pulls).toFixed(2).padStart(8)} µs/pull  ${k}`);
  console.log("\ninclusive time of the rate-limit step:");
  for (const [k, us] of [...incl.entries()].sort((a, b) => b[1] - a[1])) {
    if (!/rate_?limit|ratelimit/.test(k)) continue;
    console.log(`${(us / pulls).toFixed(2).padStart(8)} µs/pull  ${k}`);
  }
} finally {
  await s.stop().catch(() => {});
  await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
}
