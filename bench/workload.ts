// Load driver for bench/run.sh: runs the same OCI workload against any registry base URL and
// writes one JSON result file. It only speaks the distribution API, so the same code drives
// docker-registry and Wharf; a failing request aborts the run with the request and the answer.
//
// Usage: deno run -A bench/workload.ts --url http://127.0.0.1:5000 --label wharf \
//          --out bench/out/wharf.json [--pid <server pid>] [--wrk-seconds 10]
import { createHash } from "node:crypto";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: {
    url: { type: "string" },
    label: { type: "string", default: "server" },
    out: { type: "string" },
    pid: { type: "string" },
    "wrk-seconds": { type: "string", default: "10" },
    small: { type: "boolean", default: false },
  },
});
if (!args.url || !args.out) {
  console.error("usage: workload.ts --url <base> --out <file.json> [--label x] [--pid n]");
  Deno.exit(2);
}
const BASE = args.url.replace(/\/$/, "");
const WRK_SECONDS = Number(args["wrk-seconds"]);
// --small shrinks every phase so the script itself can be checked in seconds.
const SMALL = args.small;

const MiB = 1 << 20;
const MONO_COUNT = SMALL ? 8 : 64;
const MONO_SIZE = 4 * MiB;
const CONCURRENCY = 8;
const CHUNKED_SIZE = (SMALL ? 32 : 256) * MiB;
const CHUNK_SIZE = 8 * MiB;
const MANIFEST_COUNT = SMALL ? 50 : 500;
const LARGE_PULLS = 5;
const LARGE_WARMUP = 1;
const TAGS_LIST_REQUESTS = 200;
const WRK_CONNECTIONS = 32;
const REQUEST_TIMEOUT_MS = 120_000;

const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
const OCI_CONFIG = "application/vnd.oci.image.config.v1+json";
const OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip";
// Some registries answer blob GETs with a redirect; the bench measures inline serving.
const NO_REDIRECT = { "X-Svc-No-Redirect": "1" };

class BenchError extends Error {}

// run.sh stops the driver with SIGTERM on Ctrl-C; wrk must not outlive it.
const interrupted = new AbortController();
Deno.addSignalListener("SIGTERM", () => {
  interrupted.abort();
  setTimeout(() => Deno.exit(143), 50);
});

function log(msg: string) {
  console.error(`[${args.label}] ${msg}`);
}

/** fetch with a timeout; on an unexpected status throws with the request and the answer. */
async function req(
  method: string,
  url: string,
  init: { headers?: Record<string, string>; body?: BodyInit | null; expect: number[] },
): Promise<Response> {
  const res = await fetch(url, {
    method,
    headers: init.headers,
    body: init.body,
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  if (!init.expect.includes(res.status)) {
    const text = (await res.text()).slice(0, 2000);
    const hdrs = [...res.headers].map(([k, v]) => `${k}: ${v}`).join("\n  ");
    throw new BenchError(
      `${method} ${url}\n  request headers: ${JSON.stringify(init.headers ?? {})}\n` +
        `  expected ${init.expect.join("/")}, got ${res.status}\n  ${hdrs}\n  body: ${text}`,
    );
  }
  return res;
}

function fillRandom(buf: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> {
  // getRandomValues refuses more than 64 KiB per call.
  for (let o = 0; o < buf.length; o += 65536) {
    crypto.getRandomValues(buf.subarray(o, Math.min(o + 65536, buf.length)));
  }
  return buf;
}

function sha256(data: Uint8Array): string {
  return "sha256:" + createHash("sha256").update(data).digest("hex");
}

/** Runs `fn` over `items` with at most `limit` in flight. */
async function pool<T, R>(items: T[], limit: number, fn: (t: T, i: number) => Promise<R>) {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

function withDigest(location: string, digest: string): string {
  const u = new URL(location, BASE);
  u.searchParams.set("digest", digest);
  return u.href;
}

async function startUpload(ns: string): Promise<string> {
  const res = await req("POST", `${BASE}/v2/${ns}/blobs/uploads/`, { expect: [202] });
  await res.body?.cancel();
  const loc = res.headers.get("location");
  if (!loc) throw new BenchError(`POST ${BASE}/v2/${ns}/blobs/uploads/: 202 without Location`);
  return new URL(loc, BASE).href;
}

/** Docker's monolithic flow: POST to open a session, PUT the whole body with the digest. */
async function pushMonolithic(ns: string, data: Uint8Array, digest: string) {
  const loc = await startUpload(ns);
  const res = await req("PUT", withDigest(loc, digest), {
    headers: { "content-type": "application/octet-stream" },
    body: data as BodyInit,
    expect: [201],
  });
  await res.body?.cancel();
}

/** Reads a body to the end without keeping it; returns the byte count. */
async function drain(res: Response): Promise<number> {
  let n = 0;
  for await (const chunk of res.body!) n += chunk.length;
  return n;
}

function mbps(bytes: number, ms: number) {
  return bytes / 1e6 / (ms / 1000);
}

function percentile(sorted: number[], p: number) {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

// --- RSS sampling ------------------------------------------------------------------------------

function readRssKiB(pid: string): number {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(Deno.readTextFileSync(`/proc/${pid}/status`));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/** The pid and every descendant, so a server that forks helpers is counted whole. */
function processTree(pid: string): string[] {
  const out = [pid];
  for (let i = 0; i < out.length; i++) {
    try {
      for (const t of Deno.readDirSync(`/proc/${out[i]}/task`)) {
        const kids = Deno.readTextFileSync(`/proc/${out[i]}/task/${t.name}/children`).trim();
        if (kids) out.push(...kids.split(/\s+/));
      }
    } catch { /* exited */ }
  }
  return out;
}

const rss = { startMiB: 0, maxMiB: 0, phaseMaxMiB: {} as Record<string, number>, samples: 0 };
let currentPhase = "start";
function sampleRss() {
  if (!args.pid) return;
  const kib = processTree(args.pid).reduce((s, p) => s + readRssKiB(p), 0);
  const mib = kib / 1024;
  rss.samples++;
  rss.maxMiB = Math.max(rss.maxMiB, mib);
  rss.phaseMaxMiB[currentPhase] = Math.max(rss.phaseMaxMiB[currentPhase] ?? 0, mib);
}
if (args.pid) {
  sampleRss();
  rss.startMiB = rss.maxMiB;
}
const sampler = setInterval(sampleRss, 100);

// --- phases ------------------------------------------------------------------------------------

const results: Record<string, unknown> = {
  label: args.label,
  url: BASE,
  startedAt: new Date().toISOString(),
  params: {
    monoCount: MONO_COUNT,
    monoSize: MONO_SIZE,
    concurrency: CONCURRENCY,
    chunkedSize: CHUNKED_SIZE,
    largePulls: LARGE_PULLS,
    largeWarmup: LARGE_WARMUP,
    chunkSize: CHUNK_SIZE,
    manifestCount: MANIFEST_COUNT,
    wrkSeconds: WRK_SECONDS,
    wrkConnections: WRK_CONNECTIONS,
    tagsListRequests: TAGS_LIST_REQUESTS,
  },
};

async function phase<T>(name: string, fn: () => Promise<T>): Promise<T> {
  currentPhase = name;
  log(`${name} ...`);
  const t = performance.now();
  const r = await fn();
  const shown = JSON.stringify(r, (k, v) => k === "raw" || k === "digest" ? undefined : v);
  log(`${name} done in ${((performance.now() - t) / 1000).toFixed(1)} s: ${shown}`);
  results[name] = r;
  return r;
}

async function main() {
  await req("GET", `${BASE}/v2/`, { expect: [200] }).then((r) => r.body?.cancel());

  // Generated before the clock starts so the figure is the server's, not the RNG's.
  const monoNs = "bench/mono";
  const blobs = Array.from({ length: MONO_COUNT }, () => fillRandom(new Uint8Array(MONO_SIZE)));
  const digests = blobs.map(sha256);

  await phase("monoPush", async () => {
    const t = performance.now();
    await pool(blobs, CONCURRENCY, (b, i) => pushMonolithic(monoNs, b, digests[i]));
    const ms = performance.now() - t;
    return { bytes: MONO_COUNT * MONO_SIZE, ms, mbps: mbps(MONO_COUNT * MONO_SIZE, ms) };
  });

  const chunkedNs = "bench/chunked";
  const chunked = await phase("chunkedPush", async () => {
    // Each 8 MiB chunk is generated and hashed between requests and only the requests are
    // timed: the driver never holds the whole blob, and RNG cost stays out of the figure.
    const hash = createHash("sha256");
    const chunk = new Uint8Array(CHUNK_SIZE);
    let loc = await startUpload(chunkedNs);
    let requestMs = 0;
    const wall = performance.now();
    for (let start = 0; start < CHUNKED_SIZE; start += CHUNK_SIZE) {
      fillRandom(chunk);
      hash.update(chunk);
      const t = performance.now();
      const res = await req("PATCH", loc, {
        headers: {
          "content-type": "application/octet-stream",
          "content-range": `${start}-${start + CHUNK_SIZE - 1}`,
          "content-length": String(CHUNK_SIZE),
        },
        body: chunk,
        expect: [202],
      });
      await res.body?.cancel();
      requestMs += performance.now() - t;
      const range = res.headers.get("range");
      if (range !== `0-${start + CHUNK_SIZE - 1}`) {
        throw new BenchError(`PATCH ${loc}: Range ${range}, expected 0-${start + CHUNK_SIZE - 1}`);
      }
      // distribution rotates the session state in Location on every PATCH.
      const next = res.headers.get("location");
      if (next) loc = new URL(next, BASE).href;
    }
    const digest = "sha256:" + hash.digest("hex");
    const t = performance.now();
    const res = await req("PUT", withDigest(loc, digest), { expect: [201] });
    await res.body?.cancel();
    requestMs += performance.now() - t;
    const wallMs = performance.now() - wall;
    return {
      digest,
      bytes: CHUNKED_SIZE,
      requestMs,
      wallMs,
      mbps: mbps(CHUNKED_SIZE, requestMs),
    };
  });

  // One untimed GET with a full hash check, so the timed pulls below can skip hashing.
  {
    const res = await req("GET", `${BASE}/v2/${monoNs}/blobs/${digests[0]}`, {
      headers: NO_REDIRECT,
      expect: [200],
    });
    const got = sha256(new Uint8Array(await res.arrayBuffer()));
    if (got !== digests[0]) throw new BenchError(`GET blob ${digests[0]}: body hashes to ${got}`);
  }

  await phase("pullSmall", async () => {
    const t = performance.now();
    const sizes = await pool(digests, CONCURRENCY, async (d) => {
      const url = `${BASE}/v2/${monoNs}/blobs/${d}`;
      const n = await drain(await req("GET", url, { headers: NO_REDIRECT, expect: [200] }));
      if (n !== MONO_SIZE) throw new BenchError(`GET ${url}: ${n} bytes, expected ${MONO_SIZE}`);
      return n;
    });
    const ms = performance.now() - t;
    const bytes = sizes.reduce((a, b) => a + b, 0);
    return { bytes, ms, mbps: mbps(bytes, ms) };
  });

  // One 256 MiB GET lasts ~0.2 s here, so a single sample swung ±30% from run to run; the median
  // of LARGE_PULLS sequential GETs after LARGE_WARMUP untimed ones is reported (every sample is
  // kept in the JSON).
  await phase("pullLarge", async () => {
    const url = `${BASE}/v2/${chunkedNs}/blobs/${chunked.digest}`;
    for (let i = 0; i < LARGE_WARMUP; i++) {
      await drain(await req("GET", url, { headers: NO_REDIRECT, expect: [200] }));
    }
    const samples: { ms: number; mbps: number }[] = [];
    for (let i = 0; i < LARGE_PULLS; i++) {
      const t = performance.now();
      const n = await drain(await req("GET", url, { headers: NO_REDIRECT, expect: [200] }));
      const ms = performance.now() - t;
      if (n !== CHUNKED_SIZE) {
        throw new BenchError(`GET ${url}: ${n} bytes, expected ${CHUNKED_SIZE}`);
      }
      samples.push({ ms, mbps: mbps(n, ms) });
    }
    const sorted = [...samples].sort((a, b) => a.ms - b.ms);
    const median = sorted[Math.floor(sorted.length / 2)];
    return { bytes: CHUNKED_SIZE, pulls: LARGE_PULLS, ms: median.ms, mbps: median.mbps, samples };
  });

  // The same GETs from curl. The Deno fetch client above needs about a core of its own at
  // ~1.5 GB/s, so on 2 cores that row measures the client as much as the server; curl reads the
  // body for a fraction of that and leaves the server the CPU it can use.
  await phase("pullLargeCurl", async () => {
    const url = `${BASE}/v2/${chunkedNs}/blobs/${chunked.digest}`;
    const samples: { ms: number; mbps: number }[] = [];
    for (let i = 0; i <= LARGE_PULLS; i++) {
      const out = await new Deno.Command("curl", {
        args: [
          "-sS",
          "-o",
          "/dev/null",
          "-H",
          "X-Svc-No-Redirect: 1",
          "-w",
          "%{http_code} %{size_download} %{time_total}",
          url,
        ],
        stdout: "piped",
        stderr: "piped",
      }).output();
      const [code, size, secs] = new TextDecoder().decode(out.stdout).trim().split(" ");
      if (!out.success || code !== "200" || Number(size) !== CHUNKED_SIZE) {
        throw new BenchError(
          `curl ${url}: ${code} ${size} ${new TextDecoder().decode(out.stderr)}`,
        );
      }
      const ms = Number(secs) * 1000;
      if (i > 0) samples.push({ ms, mbps: mbps(CHUNKED_SIZE, ms) }); // the first is untimed
    }
    const sorted = [...samples].sort((a, b) => a.ms - b.ms);
    const median = sorted[Math.floor(sorted.length / 2)];
    return { bytes: CHUNKED_SIZE, pulls: LARGE_PULLS, ms: median.ms, mbps: median.mbps, samples };
  });

  const manNs = "bench/manifests";
  const enc = new TextEncoder();
  const configBytes = enc.encode(JSON.stringify({ architecture: "amd64", os: "linux" }));
  const layerBytes = fillRandom(new Uint8Array(1024));
  const configDigest = sha256(configBytes);
  const layerDigest = sha256(layerBytes);
  await pushMonolithic(manNs, configBytes, configDigest);
  await pushMonolithic(manNs, layerBytes, layerDigest);
  const tag = (i: number) => `t${String(i).padStart(4, "0")}`;
  const manifests = Array.from({ length: MANIFEST_COUNT }, (_, i) =>
    enc.encode(JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      config: { mediaType: OCI_CONFIG, digest: configDigest, size: configBytes.length },
      layers: [{ mediaType: OCI_LAYER, digest: layerDigest, size: layerBytes.length }],
      annotations: { "org.example.bench.index": String(i) },
    })));

  await phase("manifestPut", async () => {
    const t = performance.now();
    await pool(manifests, CONCURRENCY, async (body, i) => {
      const res = await req("PUT", `${BASE}/v2/${manNs}/manifests/${tag(i)}`, {
        headers: { "content-type": OCI_MANIFEST },
        body: body as BodyInit,
        expect: [201],
      });
      await res.body?.cancel();
    });
    const ms = performance.now() - t;
    return { count: MANIFEST_COUNT, ms, opsPerSec: MANIFEST_COUNT / (ms / 1000) };
  });

  const getUrl = `${BASE}/v2/${manNs}/manifests/${tag(0)}`;
  {
    // wrk only counts statuses; check once that the URL really serves the manifest.
    const res = await req("GET", getUrl, { headers: { accept: OCI_MANIFEST }, expect: [200] });
    const body = new Uint8Array(await res.arrayBuffer());
    if (sha256(body) !== sha256(manifests[0])) {
      throw new BenchError(`GET ${getUrl}: body differs from the pushed manifest`);
    }
  }
  await phase("manifestGetWrk", () => runWrk(getUrl));

  await phase("tagsList", async () => {
    const url = `${BASE}/v2/${manNs}/tags/list`;
    const first = await req("GET", url, { expect: [200] });
    const body = await first.json() as { tags?: string[] };
    if (body.tags?.length !== MANIFEST_COUNT) {
      throw new BenchError(
        `GET ${url}: ${body.tags?.length} tags (Link: ${first.headers.get("link")}), ` +
          `expected ${MANIFEST_COUNT}`,
      );
    }
    const times: number[] = [];
    for (let i = 0; i < TAGS_LIST_REQUESTS; i++) {
      const t = performance.now();
      const res = await req("GET", url, { expect: [200] });
      await res.arrayBuffer();
      times.push(performance.now() - t);
    }
    times.sort((a, b) => a - b);
    return {
      requests: TAGS_LIST_REQUESTS,
      tags: MANIFEST_COUNT,
      p50Ms: percentile(times, 50),
      p99Ms: percentile(times, 99),
      meanMs: times.reduce((a, b) => a + b, 0) / times.length,
    };
  });
}

function wrkLatencyMs(s: string): number {
  const m = /^([\d.]+)(us|ms|s|m)$/.exec(s);
  if (!m) return NaN;
  const f = { us: 0.001, ms: 1, s: 1000, m: 60000 }[m[2]]!;
  return Number(m[1]) * f;
}

async function runWrk(url: string) {
  const cmd = new Deno.Command("wrk", {
    args: [
      "-t2",
      `-c${WRK_CONNECTIONS}`,
      `-d${WRK_SECONDS}s`,
      "--timeout",
      "5s",
      "--latency",
      "-H",
      `Accept: ${OCI_MANIFEST}`,
      url,
    ],
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.any([
      interrupted.signal,
      AbortSignal.timeout((WRK_SECONDS + 30) * 1000),
    ]),
  });
  const out = await cmd.output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  if (!out.success) throw new BenchError(`wrk failed (${out.code}):\n${text}`);
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(text);
  const total = /(\d+) requests in/.exec(text);
  const non2xx = /Non-2xx or 3xx responses:\s+(\d+)/.exec(text);
  const sockErr = /Socket errors: (.*)/.exec(text);
  const pct = (p: string) =>
    wrkLatencyMs(new RegExp(`^\\s+${p}%\\s+(\\S+)`, "m").exec(text)?.[1] ?? "");
  if (!rps || !total) throw new BenchError(`wrk output not understood:\n${text}`);
  if (non2xx) throw new BenchError(`wrk GET ${url}: ${non2xx[1]} non-2xx responses\n${text}`);
  return {
    requests: Number(total[1]),
    reqPerSec: Number(rps[1]),
    p50Ms: pct("50"),
    p99Ms: pct("99"),
    socketErrors: sockErr?.[1] ?? null,
    raw: text,
  };
}

let failed: string | null = null;
try {
  await main();
} catch (e) {
  failed = e instanceof BenchError ? e.message : String((e as Error)?.stack ?? e);
  log(`FAILED in phase ${currentPhase}:\n${failed}`);
}
clearInterval(sampler);
sampleRss();
results.rss = rss;
results.failed = failed ? { phase: currentPhase, error: failed } : null;
results.finishedAt = new Date().toISOString();
await Deno.writeTextFile(args.out, JSON.stringify(results, null, 2) + "\n");
Deno.exit(failed ? 1 : 0);
