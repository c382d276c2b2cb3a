// Wharf on S3 against Debian's docker-registry (distribution 2.8) with its `s3` driver, both on
// the same local S3 server (@20minutes/s3rver behind bench/s3_shim.ts, one bucket, each
// registry under its own prefix), same workload:
//   1. monolithic push: BLOBS blobs of BLOB_MB MiB, POST + PUT with the body, 4 in flight
//   2. chunked push: one CHUNKED_MB MiB blob as 8 MiB PATCHes, then PUT
//   (1 and 2 one registry at a time: docker-registry, then Wharf)
//   3. pull: every blob GET following the registry's answer (both redirect to S3 by default),
//      4 in flight, bodies read to the end and sized; then the big blob
//   4. 307 latency: 200 sequential GETs of one blob, redirect not followed (p50/p99)
//   (3 and 4 with both registries up, PULL_ROUNDS times, alternating which goes first, the
//   median reported: S3 serves the bytes of every redirected pull, and the local S3 server's
//   speed drifts by ±30% from one minute to the next, more than the registries differ)
// with each server's RSS sampled every 100 ms (start and max). Then Wharf alone: the monolithic
// push with 8 in flight against 1 process vs 3 processes on one KV and one bucket, each blob's
// POST and PUT sent to different processes.
// Usage: deno run -A bench/s3_bench.ts [--small]   (results: bench/out/s3_bench.json + table)
import { join } from "node:path";
import { createHash } from "node:crypto";
import { startS3, type TestS3 } from "../tests/helpers/s3_server.ts";
import { s3Toml, startServer, type TestServer } from "../tests/helpers/server.ts";
import { freePort } from "../tests/e2e/_distribution.ts";
import { startS3Shim } from "./s3_shim.ts";

const SMALL = Deno.args.includes("--small");
const BLOBS = SMALL ? 8 : 24;
const BLOB_MB = 8;
const CHUNKED_MB = SMALL ? 32 : 128;
const CHUNK_MB = 8;
const LATENCY_N = 200;
const PULL_ROUNDS = SMALL ? 1 : 3;
const MB = 1e6;

interface Side {
  name: string;
  url: string;
  pid: number;
  stop(): Promise<void>;
}

function rssMiB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(Deno.readTextFileSync(`/proc/${pid}/status`));
    return m ? Number(m[1]) / 1024 : 0;
  } catch {
    return 0;
  }
}

function sampler(pid: number) {
  let max = rssMiB(pid);
  const start = max;
  const t = setInterval(() => (max = Math.max(max, rssMiB(pid))), 100);
  return { start, stop: () => (clearInterval(t), max) };
}

function blobOf(n: number, seed: number): Uint8Array {
  const b = new Uint8Array(n);
  crypto.getRandomValues(b.subarray(0, 65536));
  for (let i = 65536; i < n; i += 65536) b.copyWithin(i, 0, Math.min(65536, n - i));
  b[0] = seed & 0xff;
  b[1] = seed >> 8;
  return b;
}
// Each blob's digest is computed once: hashing an 8 MiB blob takes the client ~6 ms, which
// inside a timed request measured the client (every 307 "took" 6 ms on both registries).
const digests = new WeakMap<Uint8Array, string>();
const sha = (b: Uint8Array) => {
  let d = digests.get(b);
  if (!d) digests.set(b, d = `sha256:${createHash("sha256").update(b).digest("hex")}`);
  return d;
};

async function pool<T>(items: T[], n: number, fn: (t: T, i: number) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (next < items.length) {
        const i = next++;
        await fn(items[i], i);
      }
    }),
  );
}

async function ok(r: Response, want: number, what: string): Promise<Response> {
  if (r.status !== want) throw new Error(`${what}: ${r.status} ${await r.text()}`);
  return r;
}

/** POST then PUT with the body (docker's flow), the PUT to `urls[(i+1) % n]`. */
async function pushMonolithic(urls: string[], ns: string, blobs: Uint8Array[], inFlight: number) {
  const t = performance.now();
  await pool(blobs, inFlight, async (b, i) => {
    const p = await ok(
      await fetch(`${urls[i % urls.length]}/v2/${ns}/blobs/uploads/`, { method: "POST" }),
      202,
      "POST",
    );
    await p.body?.cancel();
    const loc = p.headers.get("location")!;
    const put = new URL(loc, urls[(i + 1) % urls.length]);
    put.searchParams.set("digest", sha(b));
    const r = await ok(
      await fetch(put, {
        method: "PUT",
        body: b as BodyInit,
        headers: { "content-type": "application/octet-stream" },
      }),
      201,
      "PUT",
    );
    await r.body?.cancel();
  });
  return (blobs.length * blobs[0].length) / MB / ((performance.now() - t) / 1000);
}

async function pushChunked(url: string, ns: string, big: Uint8Array) {
  const t = performance.now();
  const p = await ok(
    await fetch(`${url}/v2/${ns}/blobs/uploads/`, { method: "POST" }),
    202,
    "POST",
  );
  await p.body?.cancel();
  let loc = p.headers.get("location")!;
  const step = CHUNK_MB << 20;
  for (let at = 0; at < big.length; at += step) {
    const chunk = big.subarray(at, Math.min(big.length, at + step));
    const r = await ok(
      await fetch(new URL(loc, url), {
        method: "PATCH",
        body: chunk as BodyInit,
        headers: {
          "content-type": "application/octet-stream",
          "content-range": `${at}-${at + chunk.length - 1}`,
        },
      }),
      202,
      "PATCH",
    );
    await r.body?.cancel();
    loc = r.headers.get("location")!;
  }
  const put = new URL(loc, url);
  put.searchParams.set("digest", sha(big));
  const r = await ok(await fetch(put, { method: "PUT" }), 201, "PUT chunked");
  await r.body?.cancel();
  return big.length / MB / ((performance.now() - t) / 1000);
}

async function pull(url: string, ns: string, blobs: Uint8Array[], inFlight: number) {
  const t = performance.now();
  await pool(blobs, inFlight, async (b) => {
    const r = await ok(await fetch(`${url}/v2/${ns}/blobs/${sha(b)}`), 200, "GET");
    let n = 0;
    for await (const c of r.body!) n += c.byteLength;
    if (n !== b.length) throw new Error(`GET: ${n} of ${b.length} bytes`);
  });
  return (blobs.length * blobs[0].length) / MB / ((performance.now() - t) / 1000);
}

async function redirectLatency(url: string, ns: string, b: Uint8Array) {
  const ms: number[] = [];
  let status = 0;
  for (let i = 0; i < LATENCY_N; i++) {
    const t = performance.now();
    const r = await fetch(`${url}/v2/${ns}/blobs/${sha(b)}`, { redirect: "manual" });
    await r.body?.cancel();
    ms.push(performance.now() - t);
    status = r.status;
  }
  ms.sort((a, b) => a - b);
  return { status, p50: ms[Math.floor(ms.length * 0.5)], p99: ms[Math.floor(ms.length * 0.99)] };
}

type Endpoint = Pick<TestS3, "endpoint" | "bucket" | "accessKeyId" | "secretKey">;

async function startWharf(s3: Endpoint, prefix: string, kv?: string): Promise<TestServer> {
  return await startServer({
    blobStore: s3Toml(s3.endpoint, prefix).replace(`${5 << 20}`, `${8 << 20}`),
    metadataPath: kv,
    unchecked: true,
  });
}

async function startDistributionS3(s3: Endpoint): Promise<Side> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-bench-dist-" });
  const port = freePort();
  await Deno.writeTextFile(
    join(dir, "config.yml"),
    `version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  cache:
    blobdescriptor: inmemory
  s3:
    region: us-east-1
    regionendpoint: ${s3.endpoint}
    bucket: ${s3.bucket}
    accesskey: ${s3.accessKeyId}
    secretkey: ${s3.secretKey}
    secure: false
    v4auth: true
    chunksize: ${8 << 20}
    rootdirectory: /dist
  delete:
    enabled: true
http:
  addr: 127.0.0.1:${port}
`,
  );
  // The AWS SDK in docker-registry refuses to start with AWS_CA_BUNDLE set (some sandboxes set
  // it) when its transport is customised; the local endpoint is plain HTTP anyway.
  const env = Deno.env.toObject();
  delete env.AWS_CA_BUNDLE;
  const child = new Deno.Command("docker-registry", {
    args: ["serve", join(dir, "config.yml")],
    env,
    clearEnv: true,
    stdout: "null",
    stderr: "piped",
  }).spawn();
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0;; i++) {
    try {
      const r = await fetch(`${url}/v2/`);
      await r.body?.cancel();
      if (r.ok) break;
    } catch { /* not yet */ }
    if (i > 100) throw new Error("docker-registry did not start");
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    name: "docker-registry 2.8 (s3 driver)",
    url,
    pid: child.pid,
    async stop() {
      child.kill("SIGTERM");
      await child.stderr.cancel();
      await child.status;
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

interface Result {
  name: string;
  pushMBs: number;
  chunkedMBs: number;
  pullMBs: number;
  bigPullMBs: number;
  redirect: { status: number; p50: number; p99: number };
  rssStart: number;
  rssMax: number;
}

const NS = "bench/s3";
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function pushSide(side: Side, blobs: Uint8Array[], big: Uint8Array) {
  const mem = sampler(side.pid);
  const pushMBs = await pushMonolithic([side.url], NS, blobs, 4);
  const chunkedMBs = await pushChunked(side.url, NS, big);
  return { mem, pushMBs, chunkedMBs };
}

/** The pull phases, both registries up, alternating; medians per registry. */
async function pullPhases(sides: Side[], blobs: Uint8Array[], big: Uint8Array) {
  const got = sides.map(() => ({
    pull: [] as number[],
    big: [] as number[],
    p50: [] as number[],
    p99: [] as number[],
    status: 0,
  }));
  for (let r = 0; r < PULL_ROUNDS; r++) {
    const order = r % 2 === 0 ? [0, 1] : [1, 0];
    for (const k of order) got[k].pull.push(await pull(sides[k].url, NS, blobs, 4));
    for (const k of order) got[k].big.push(await pull(sides[k].url, NS, [big], 1));
    for (const k of order) {
      const l = await redirectLatency(sides[k].url, NS, blobs[0]);
      got[k].p50.push(l.p50);
      got[k].p99.push(l.p99);
      got[k].status = l.status;
    }
  }
  return got.map((g) => ({
    pullMBs: median(g.pull),
    bigPullMBs: median(g.big),
    redirect: { status: g.status, p50: median(g.p50), p99: median(g.p99) },
  }));
}

const real = await startS3({ laxSignatures: true });
// docker-registry's s3 driver lists multipart uploads and parts, which s3rver does not
// implement: both registries go through the shim that adds them (bench/s3_shim.ts).
const shim = startS3Shim(real.endpoint, real.bucket);
const s3: Endpoint = { ...real, endpoint: shim.endpoint };
const results: Result[] = [];
let scale: { one: number; three: number } | null = null;
try {
  const blobs = Array.from({ length: BLOBS }, (_, i) => blobOf(BLOB_MB << 20, i));
  const big = blobOf(CHUNKED_MB << 20, 9999);
  for (const b of [...blobs, big]) sha(b);

  const dist = await startDistributionS3(s3);
  let w: TestServer | null = null;
  try {
    const dPush = await pushSide(dist, blobs, big);
    w = await startWharf(s3, "wharf1");
    const wSide = { ...w, name: "Wharf (S3 store)" };
    const wPush = await pushSide(wSide, blobs, big);
    const pulls = await pullPhases([dist, wSide], blobs, big);
    for (const [k, side, p] of [[0, dist, dPush], [1, wSide, wPush]] as const) {
      results.push({
        name: side.name,
        pushMBs: p.pushMBs,
        chunkedMBs: p.chunkedMBs,
        ...pulls[k],
        rssStart: p.mem.start,
        rssMax: p.mem.stop(),
      });
    }
  } finally {
    await dist.stop();
    if (w) {
      await w.stop();
      await Deno.remove(w.dataDir, { recursive: true }).catch(() => {});
    }
  }

  // 1 process vs 3 processes on one KV and one bucket (fresh blobs: nothing deduplicated).
  const one = await startWharf(s3, "scale1");
  const fresh1 = Array.from({ length: BLOBS }, (_, i) => blobOf(BLOB_MB << 20, 20_000 + i));
  const fresh3 = Array.from({ length: BLOBS }, (_, i) => blobOf(BLOB_MB << 20, 30_000 + i));
  for (const b of [...fresh1, ...fresh3]) sha(b);
  let oneMBs: number;
  try {
    oneMBs = await pushMonolithic([one.url], "bench/one", fresh1, 8);
  } finally {
    await one.stop();
    await Deno.remove(one.dataDir, { recursive: true }).catch(() => {});
  }
  const kvDir = await Deno.makeTempDir({ prefix: "wharf-bench-kv-" });
  const three: TestServer[] = [];
  try {
    for (let i = 0; i < 3; i++) three.push(await startWharf(s3, "scale3", join(kvDir, "m.kv")));
    const threeMBs = await pushMonolithic(three.map((s) => s.url), "bench/three", fresh3, 8);
    scale = { one: oneMBs, three: threeMBs };
  } finally {
    for (const s of three) await s.stop();
    for (const s of three) await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
    await Deno.remove(kvDir, { recursive: true }).catch(() => {});
  }
} finally {
  await shim.close();
  await real.close();
}

const [d, w] = results;
const f = (n: number) => n.toFixed(1);
const ratio = (a: number, b: number) => `${(a / b).toFixed(2)}×`;
const table =
  `| ${BLOBS} × ${BLOB_MB} MiB, ${CHUNKED_MB} MiB chunked | ${d.name} | ${w.name} | Wharf / registry |
| --- | --- | --- | --- |
| monolithic push MB/s (4 in flight) | ${f(d.pushMBs)} | ${f(w.pushMBs)} | ${
    ratio(w.pushMBs, d.pushMBs)
  } |
| chunked push MB/s (${CHUNK_MB} MiB PATCHes) | ${f(d.chunkedMBs)} | ${f(w.chunkedMBs)} | ${
    ratio(w.chunkedMBs, d.chunkedMBs)
  } |
| pull MB/s, redirects followed (4 in flight; median of ${PULL_ROUNDS}) | ${f(d.pullMBs)} | ${
    f(w.pullMBs)
  } | ${ratio(w.pullMBs, d.pullMBs)} |
| pull MB/s, ${CHUNKED_MB} MiB blob | ${f(d.bigPullMBs)} | ${f(w.bigPullMBs)} | ${
    ratio(w.bigPullMBs, d.bigPullMBs)
  } |
| blob GET answer (status ${d.redirect.status} / ${w.redirect.status}) p50 ms (median of ${PULL_ROUNDS}) | ${
    f(d.redirect.p50)
  } | ${f(w.redirect.p50)} | ${ratio(d.redirect.p50, w.redirect.p50)} |
| blob GET answer p99 ms | ${f(d.redirect.p99)} | ${f(w.redirect.p99)} | ${
    ratio(d.redirect.p99, w.redirect.p99)
  } |
| server RSS start → max MiB | ${f(d.rssStart)} → ${f(d.rssMax)} | ${f(w.rssStart)} → ${
    f(w.rssMax)
  } | ${ratio(d.rssMax, w.rssMax)} |

| Wharf monolithic push, 8 in flight | 1 process | 3 processes (POST and PUT on different ones) |
| --- | --- | --- |
| MB/s | ${f(scale!.one)} | ${f(scale!.three)} (${ratio(scale!.three, scale!.one)}) |
`;
console.log(table);
const out = new URL("./out/", import.meta.url);
await Deno.mkdir(out, { recursive: true });
await Deno.writeTextFile(
  new URL("s3_bench.json", out),
  JSON.stringify({ results, scale }, null, 2),
);
await Deno.writeTextFile(new URL("s3_bench.md", out), table);
