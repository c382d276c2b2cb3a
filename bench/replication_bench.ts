// Replication, side by side in one run (issue: replication, Performance):
// 1. lag: 200 small image pushes on Wharf A (replicating to Wharf B), time from A's 201 until
//    the tag answers on B, p50/p99;
// 2. throughput: a 1 GiB image (4 × 256 MiB random layers) pushed to A's replicated namespace,
//    time until B holds it, against `skopeo copy` of the same image from A to B (another name);
//    A's peak RSS while it replicates.
// Run: deno run -A --unstable-kv bench/replication_bench.ts [--small]   (loopback only)
import { createHash } from "node:crypto";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { wharfCommand } from "../tests/helpers/launch.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const SMALL = Deno.args.includes("--small");
const PUSHES = SMALL ? 40 : 200;
const LAYER_MB = SMALL ? 16 : 256;
const LAYERS = 4;

interface Server {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const p = (l.addr as Deno.NetAddr).port;
  l.close();
  return p;
}

async function start(port: number, extra: string): Promise<Server> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-repl-bench-" });
  const cfg = join(dir, "wharf.toml");
  await Deno.writeTextFile(
    cfg,
    `[server]\nbind_address = "127.0.0.1"\nport = ${port}\n[blob_store.fs]\nroot_dir = "${dir}/blobs"\n[metadata_store]\npath = "${dir}/m.kv"\n[global.index]\non_push = "none"\n${extra}`,
  );
  const child = wharfCommand(["serve", "-c", cfg], {
    stdout: "piped",
    stderr: "inherit",
    env: { NO_COLOR: "1" },
  }).spawn();
  const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  let out = "";
  while (!out.includes("listening on")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`server exited: ${out}`);
    out += value;
  }
  reader.releaseLock();
  child.stdout.cancel().catch(() => {});
  return {
    url: `http://127.0.0.1:${port}`,
    pid: child.pid,
    stop: async () => {
      child.kill("SIGTERM");
      await child.status;
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

const sha = (b: Uint8Array) => `sha256:${createHash("sha256").update(b).digest("hex")}`;

async function pushBlob(url: string, ns: string, data: Uint8Array): Promise<string> {
  const d = sha(data);
  const r = await fetch(`${url}/v2/${ns}/blobs/uploads/?digest=${d}`, {
    method: "POST",
    body: data as BodyInit,
  });
  if (r.status !== 201) throw new Error(`push blob ${r.status} ${await r.text()}`);
  return d;
}

/** A blob of `mb` MiB of random bytes, streamed as PATCH chunks (never held whole). */
async function pushBigBlob(
  url: string,
  ns: string,
  mb: number,
): Promise<{ digest: string; size: number }> {
  const start = await fetch(`${url}/v2/${ns}/blobs/uploads/`, { method: "POST" });
  await start.body?.cancel();
  let loc = new URL(start.headers.get("location")!, url).href;
  const h = createHash("sha256");
  const chunk = new Uint8Array(8 * 1024 * 1024);
  let at = 0;
  for (let i = 0; i < (mb * 1024 * 1024) / chunk.length; i++) {
    for (let o = 0; o < chunk.length; o += 65536) {
      crypto.getRandomValues(chunk.subarray(o, o + 65536));
    }
    h.update(chunk);
    const r = await fetch(loc, {
      method: "PATCH",
      body: chunk as BodyInit,
      headers: {
        "content-type": "application/octet-stream",
        "content-range": `${at}-${at + chunk.length - 1}`,
      },
    });
    await r.body?.cancel();
    if (r.status !== 202) throw new Error(`PATCH ${r.status}`);
    loc = new URL(r.headers.get("location")!, url).href;
    at += chunk.length;
  }
  const digest = `sha256:${h.digest("hex")}`;
  const u = new URL(loc);
  u.searchParams.set("digest", digest);
  const r = await fetch(u, { method: "PUT" });
  await r.body?.cancel();
  if (r.status !== 201) throw new Error(`PUT ${r.status}`);
  return { digest, size: at };
}

async function putManifest(url: string, ns: string, tag: string, body: Uint8Array) {
  const r = await fetch(`${url}/v2/${ns}/manifests/${tag}`, {
    method: "PUT",
    body: body as BodyInit,
    headers: { "content-type": "application/vnd.oci.image.manifest.v1+json" },
  });
  await r.body?.cancel();
  if (r.status !== 201) throw new Error(`manifest ${r.status}`);
}

async function has(url: string, ns: string, tag: string): Promise<boolean> {
  const r = await fetch(`${url}/v2/${ns}/manifests/${tag}`, {
    method: "HEAD",
    headers: { accept: "application/vnd.oci.image.manifest.v1+json" },
  });
  await r.body?.cancel();
  return r.status === 200;
}

function manifest(
  config: { digest: string; size: number },
  layers: { digest: string; size: number }[],
) {
  return new TextEncoder().encode(JSON.stringify({
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: { mediaType: "application/vnd.oci.image.config.v1+json", ...config },
    layers: layers.map((l) => ({ mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", ...l })),
  }));
}

function rssKiB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(Deno.readTextFileSync(`/proc/${pid}/status`));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

const pct = (s: number[], p: number) => s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];

const bPort = freePort();
const b = await start(bPort, "");
const a = await start(
  freePort(),
  `[[repository."app".downstream]]\nname = "b"\nurl = "http://127.0.0.1:${bPort}"\n`,
);
const results: Record<string, unknown> = { date: new Date().toISOString(), small: SMALL };
try {
  // 1. lag
  const cfgBlob = new TextEncoder().encode('{"os":"linux"}');
  const cfgDigest = await pushBlob(a.url, "app/lag", cfgBlob);
  const pending = new Map<string, number>();
  const lags: number[] = [];
  let done = false;
  const poller = (async () => {
    while (!done || pending.size) {
      await Promise.all([...pending].map(async ([tag, at]) => {
        if (await has(b.url, "app/lag", tag)) {
          lags.push(performance.now() - at);
          pending.delete(tag);
        }
      }));
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  for (let i = 0; i < PUSHES; i++) {
    const layer = crypto.getRandomValues(new Uint8Array(4096));
    const ld = await pushBlob(a.url, "app/lag", layer);
    const m = manifest({ digest: cfgDigest, size: cfgBlob.length }, [{
      digest: ld,
      size: layer.length,
    }]);
    await putManifest(a.url, "app/lag", `t${i}`, m);
    pending.set(`t${i}`, performance.now());
    await new Promise((r) => setTimeout(r, 20));
  }
  done = true;
  await poller;
  lags.sort((x, y) => x - y);
  results.lag = {
    pushes: PUSHES,
    p50_ms: pct(lags, 50),
    p99_ms: pct(lags, 99),
    max_ms: lags[lags.length - 1],
  };
  console.log(
    `lag over ${PUSHES} pushes: p50 ${pct(lags, 50).toFixed(0)} ms, p99 ${
      pct(lags, 99).toFixed(0)
    } ms`,
  );

  // 2. throughput: the image is pushed to a non-replicated name first, then tagged into app/.
  const layers = [];
  for (let i = 0; i < LAYERS; i++) layers.push(await pushBigBlob(a.url, "src/big", LAYER_MB));
  const bigCfg = await pushBlob(a.url, "src/big", cfgBlob);
  const m = manifest({ digest: bigCfg, size: cfgBlob.length }, layers);
  await putManifest(a.url, "src/big", "v1", m);
  const total = layers.reduce((n, l) => n + l.size, 0);
  // Replicated: mount the layers into app/big (no bytes moved on A), then tag.
  for (const l of [...layers, { digest: bigCfg }]) {
    const r = await fetch(`${a.url}/v2/app/big/blobs/uploads/?mount=${l.digest}&from=src/big`, {
      method: "POST",
    });
    await r.body?.cancel();
  }
  let peak = 0;
  const base = rssKiB(a.pid);
  const sampler = setInterval(() => (peak = Math.max(peak, rssKiB(a.pid))), 50);
  let t = performance.now();
  await putManifest(a.url, "app/big", "v1", m);
  while (!(await has(b.url, "app/big", "v1"))) await new Promise((r) => setTimeout(r, 20));
  const replMs = performance.now() - t;
  clearInterval(sampler);
  t = performance.now();
  const sk = await new Deno.Command("skopeo", {
    args: [
      "copy",
      "--src-tls-verify=false",
      "--dest-tls-verify=false",
      `docker://${a.url.slice(7)}/src/big:v1`,
      `docker://${b.url.slice(7)}/skopeo/big:v1`,
    ],
    stdout: "null",
    stderr: "piped",
  }).output();
  const skopeoMs = performance.now() - t;
  if (!sk.success) throw new Error(new TextDecoder().decode(sk.stderr));
  const mb = total / 1024 / 1024;
  results.throughput = {
    bytes: total,
    wharf_ms: replMs,
    wharf_mib_s: mb / (replMs / 1000),
    skopeo_ms: skopeoMs,
    skopeo_mib_s: mb / (skopeoMs / 1000),
    ratio: skopeoMs / replMs,
    sender_rss_peak_mib: peak / 1024,
    sender_rss_base_mib: base / 1024,
  };
  console.log(
    `throughput ${mb.toFixed(0)} MiB: wharf ${(mb / (replMs / 1000)).toFixed(0)} MiB/s, skopeo ${
      (mb / (skopeoMs / 1000)).toFixed(0)
    } MiB/s (ratio ${(skopeoMs / replMs).toFixed(2)}x); sender RSS peak ${
      (peak / 1024).toFixed(0)
    } MiB (base ${(base / 1024).toFixed(0)})`,
  );
} finally {
  await a.stop();
  await b.stop();
}
await Deno.mkdir(join(ROOT, "bench/out"), { recursive: true });
await Deno.writeTextFile(
  join(ROOT, "bench/out/replication.json"),
  JSON.stringify(results, null, 2),
);
