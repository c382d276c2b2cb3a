// Rate limits (issue 26, part 3): pull throughput with the limits on (high enough never to trip)
// beside the limits off and beside Debian's docker-registry, in one run, and the KV operations
// the limiter makes per request. A pull is what `docker pull` of a one-layer image sends: the
// manifest GET, the config blob GET and the layer blob GET. CONCURRENCY clients pull at once
// from this process for ROUND_SECS, the servers taking turns round after round so the load
// other agents put on this shared machine falls on every side alike.
//
// Sides: docker-registry; Wharf off and on with every request from one client IP (one hot
// bucket); Wharf off and on with each pull from one of 1,000 client IPs behind a trusted proxy (many
// buckets: the worst case for the KV cost, as every identity comes back with a stale view that is
// read again, in getManys shared by up to five identities, and settled).
//
// Run: deno run -A --unstable-kv bench/rate_limit_bench.ts [--small]
import { sha256Hex, startServer, type TestServer } from "../tests/helpers/server.ts";
import { type Distribution, startDistribution } from "../tests/e2e/_distribution.ts";

const small = Deno.args.includes("--small");
const CONCURRENCY = 16;
const ROUND_SECS = small ? 1 : 2;
const ROUNDS = small ? 4 : 16;
const IPS = 1000;
const LAYER = new Uint8Array(64 * 1024).map((_, i) => (i * 31) & 0xff);

interface Side {
  name: string;
  url: string;
  /** X-Forwarded-For for the i-th pull, or null */
  ip: ((i: number) => string) | null;
  pulls: number;
  seconds: number;
  /** pulls/s of each round */
  rates: number[];
  metrics: boolean;
  /** the server process (Wharf sides), for its CPU time */
  pid?: number;
  /** server CPU seconds spent in the measured rounds */
  cpu: number;
}

/** User + system CPU seconds of a process so far (Linux /proc). */
function cpuSecs(pid: number): number {
  const f = Deno.readTextFileSync(`/proc/${pid}/stat`).split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) / 100;
}

const limits = `
[global.rate_limit]
pulls_per_hour = 1000000000
requests_per_second = 1000000
burst = 1000000000
`;

/** POST + PUT (docker-registry 2.8 has no monolithic POST), then the manifest. */
async function pushBlob(url: string, data: Uint8Array): Promise<string> {
  const digest = `sha256:${await sha256Hex(data)}`;
  const post = await fetch(`${url}/v2/bench/app/blobs/uploads/`, { method: "POST" });
  await post.body?.cancel();
  const loc = new URL(post.headers.get("location")!, url);
  loc.searchParams.set("digest", digest);
  const put = await fetch(loc, { method: "PUT", body: data as BodyInit });
  await put.body?.cancel();
  if (put.status !== 201) throw new Error(`push ${url}: ${put.status}`);
  return digest;
}

async function pushImage(url: string): Promise<{ digest: string; blobs: string[] }> {
  const config = new TextEncoder().encode('{"architecture":"amd64","os":"linux"}');
  const blobs = [await pushBlob(url, config), await pushBlob(url, LAYER)];
  const body = new TextEncoder().encode(JSON.stringify({
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: {
      mediaType: "application/vnd.oci.image.config.v1+json",
      digest: blobs[0],
      size: config.length,
    },
    layers: [{
      mediaType: "application/vnd.oci.image.layer.v1.tar+gzip",
      digest: blobs[1],
      size: LAYER.length,
    }],
  }));
  const r = await fetch(`${url}/v2/bench/app/manifests/v1`, {
    method: "PUT",
    body,
    headers: { "content-type": "application/vnd.oci.image.manifest.v1+json" },
  });
  await r.body?.cancel();
  if (r.status !== 201) throw new Error(`manifest ${url}: ${r.status}`);
  return { digest: `sha256:${await sha256Hex(body)}`, blobs };
}

async function pullOnce(side: Side, i: number, manifestDigest: string, blobs: string[]) {
  const h: Record<string, string> = {
    accept: "application/vnd.oci.image.manifest.v1+json",
  };
  if (side.ip) h["x-forwarded-for"] = side.ip(i);
  const m = await fetch(`${side.url}/v2/bench/app/manifests/v1`, { headers: h });
  await m.arrayBuffer();
  if (m.status !== 200) throw new Error(`${side.name}: manifest ${m.status}`);
  if (m.headers.get("docker-content-digest") !== manifestDigest) {
    throw new Error(`${side.name}: manifest digest`);
  }
  for (const d of blobs) {
    const r = await fetch(`${side.url}/v2/bench/app/blobs/${d}`, { headers: h });
    await r.arrayBuffer();
    if (r.status !== 200) throw new Error(`${side.name}: blob ${r.status}`);
  }
}

async function round(side: Side, digest: string, blobs: string[]): Promise<void> {
  const cpu0 = side.pid ? cpuSecs(side.pid) : 0;
  const until = performance.now() + ROUND_SECS * 1000;
  const t0 = performance.now();
  let n = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (performance.now() < until) {
        await pullOnce(side, side.pulls + n++, digest, blobs);
      }
    }),
  );
  const secs = (performance.now() - t0) / 1000;
  side.pulls += n;
  side.seconds += secs;
  side.rates.push(n / secs);
  if (side.pid) side.cpu += cpuSecs(side.pid) - cpu0;
}

/** Sum of a counter family (all label sets) in a /metrics text. */
function total(text: string, name: string, filter = ""): number {
  let sum = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name) || line.startsWith("#")) continue;
    if (filter && !line.includes(filter)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== "{" && rest[0] !== " ") continue;
    sum += Number(line.split(" ").pop());
  }
  return sum;
}

async function scrape(url: string) {
  const t = await (await fetch(`${url}/metrics`)).text();
  return {
    limiterOps: total(t, "wharf_rate_limit_kv_operations_total", 'op="gets"') +
      total(t, "wharf_rate_limit_kv_operations_total", 'op="commits"'),
    kvOps: total(t, "wharf_kv_operation_duration_seconds_count"),
  };
}

const servers: TestServer[] = [];
let dist: Distribution | null = null;
try {
  dist = await startDistribution();
  const off = await startServer({ unchecked: true });
  servers.push(off);
  const on = await startServer({ unchecked: true, config: limits });
  servers.push(on);
  const onMany = await startServer({
    unchecked: true,
    config: limits,
    server: 'trusted_proxies = ["127.0.0.1/32"]',
  });
  servers.push(onMany);
  const offMany = await startServer({
    unchecked: true,
    server: 'trusted_proxies = ["127.0.0.1/32"]',
  });
  servers.push(offMany);
  const urls = [dist.url, off.url, on.url, offMany.url, onMany.url];
  const manyIps = (i: number) => `10.${(i % IPS) >> 8}.${(i % IPS) & 0xff}.1`;
  let digest = "";
  let blobs: string[] = [];
  for (const u of urls) ({ digest, blobs } = await pushImage(u));
  const sides: Side[] = [
    {
      name: "docker-registry",
      url: dist.url,
      ip: null,
      pulls: 0,
      seconds: 0,
      rates: [],
      metrics: false,
      cpu: 0,
    },
    {
      name: "wharf, limits off",
      url: off.url,
      ip: null,
      pulls: 0,
      seconds: 0,
      rates: [],
      metrics: true,
      pid: off.pid,
      cpu: 0,
    },
    {
      name: "wharf, limits on (1 client IP)",
      url: on.url,
      ip: null,
      pulls: 0,
      seconds: 0,
      rates: [],
      metrics: true,
      pid: on.pid,
      cpu: 0,
    },
    {
      name: `wharf, limits off (${IPS} client IPs)`,
      url: offMany.url,
      ip: manyIps,
      pulls: 0,
      seconds: 0,
      rates: [],
      metrics: true,
      pid: offMany.pid,
      cpu: 0,
    },
    {
      name: `wharf, limits on (${IPS} client IPs)`,
      url: onMany.url,
      ip: manyIps,
      pulls: 0,
      seconds: 0,
      rates: [],
      metrics: true,
      pid: onMany.pid,
      cpu: 0,
    },
  ];
  // Warm-up: connections, JIT, first bucket loads.
  for (const s of sides) {
    for (let i = 0; i < 20; i++) await pullOnce(s, i, digest, blobs);
  }
  const before = await Promise.all(sides.map((s) => s.metrics ? scrape(s.url) : null));
  // Each round starts with the next side, so no side always follows the same one.
  for (let r = 0; r < ROUNDS; r++) {
    for (let k = 0; k < sides.length; k++) {
      await round(sides[(r + k) % sides.length], digest, blobs);
    }
  }
  // Let the last settle run before counting its KV operations.
  await new Promise((r) => setTimeout(r, 1500));
  const after = await Promise.all(sides.map((s) => s.metrics ? scrape(s.url) : null));
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  // Each "on" side against the "off" side with the same clients (one IP, or 1,000 through a
  // trusted proxy, whose X-Forwarded-For handling costs on its own).
  const baseOf = (i: number) => median(sides[i <= 2 ? 1 : 3].rates);
  console.log(
    `rate limit bench: ${CONCURRENCY} concurrent pulls (manifest + config + 64 KiB layer), ` +
      `${ROUNDS} rounds of ${ROUND_SECS} s per side, taking turns; median round ` +
      `(load average ${Deno.loadavg().map((x) => x.toFixed(1)).join(" ")})\n`,
  );
  console.log(
    "| side | pulls/s | vs limits off | server CPU ms / pull | limiter KV ops / request | all KV ops / request |",
  );
  console.log("|---|---:|---:|---:|---:|---:|");
  for (const [i, s] of sides.entries()) {
    const rate = median(s.rates);
    const b = before[i];
    const a = after[i];
    // Three requests a pull (the scrapes themselves are left out).
    const reqs = s.pulls * 3;
    const lim = a && b ? ((a.limiterOps - b.limiterOps) / reqs).toFixed(4) : "–";
    const all = a && b ? ((a.kvOps - b.kvOps) / reqs).toFixed(3) : "–";
    const base = baseOf(i);
    const vs = i === 0 ? "–" : `${(((rate - base) / base) * 100).toFixed(1)}%`;
    const cpu = s.pid ? ((s.cpu / s.pulls) * 1000).toFixed(3) : "–";
    console.log(`| ${s.name} | ${rate.toFixed(0)} | ${vs} | ${cpu} | ${lim} | ${all} |`);
  }
} finally {
  for (const s of servers) await s.stop().catch(() => {});
  for (const s of servers) await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
  await dist?.stop();
}
