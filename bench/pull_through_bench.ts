// Pull-through, side by side in one run (issue: durable jobs + pull-through, Performance), with
// Debian's docker-registry as the upstream A:
// 1. a 3-layer ~100 MiB image pulled straight from A, through Wharf cold then warm, and through
//    docker-registry B configured as a proxy of A (`proxy.remoteurl`) cold then warm; 3 rounds,
//    each with a fresh image, medians reported;
// 2. Wharf's peak RSS while 16 clients pull one uncached 256 MiB blob at once (all verified);
// 3. where the CPU goes: single layer GETs straight from A, through Wharf cold, then warm, with
//    the CPU time (utime+stime from /proc) each process spent on them — the upstream, the client
//    (this process) and Wharf. Wall time is noisy on a shared machine; CPU time much less so, and
//    on 2 cores it bounds the wall time from below: wall >= total CPU / 2.
// A pull is what a client does: the manifest, then the config and layers 3 at a time.
// Run: deno run -A --unstable-kv bench/pull_through_bench.ts [--small]   (loopback only)
import { createHash } from "node:crypto";
import { join } from "node:path";
import { pullImage, pushImage } from "./image_traffic.ts";
import { fileURLToPath } from "node:url";
import { wharfCommand } from "../tests/helpers/launch.ts";
import { freePort, startDistribution } from "../tests/e2e/_distribution.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const SMALL = Deno.args.includes("--small");
const LAYER_MB = SMALL ? 8 : 33;
const BIG_MB = SMALL ? 32 : 256;
const ROUNDS = 3;
const CLIENTS = 16;

interface Wharf {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

async function startWharf(upstream: string): Promise<Wharf> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-pt-bench-" });
  const port = freePort();
  const cfg = join(dir, "wharf.toml");
  await Deno.writeTextFile(
    cfg,
    `[server]\nbind_address = "127.0.0.1"\nport = ${port}\n[blob_store.fs]\nroot_dir = "${dir}/blobs"\n` +
      `[metadata_store]\npath = "${dir}/m.kv"\n[repository."hub"]\n` +
      `[[repository."hub".upstream]]\nurl = "${upstream}"\n`,
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
    if (done) throw new Error(`wharf exited: ${out}`);
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

/** Reads a body to the end; with `verify`, checks it hashes to `digest`. */
async function drain(r: Response, digest?: string): Promise<number> {
  if (r.status !== 200) throw new Error(`GET ${r.url}: ${r.status} ${await r.text()}`);
  const h = digest ? createHash("sha256") : null;
  let n = 0;
  for await (const c of r.body!) {
    n += c.length;
    h?.update(c);
  }
  if (h && `sha256:${h.digest("hex")}` !== digest) throw new Error(`${r.url}: wrong bytes`);
  return n;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** CPU time (user + system) a process has used, in ms ("self": this one). */
function cpuMs(pid: number | "self"): number {
  const f = Deno.readTextFileSync(`/proc/${pid}/stat`).split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) * (1000 / 100); // clock ticks (USER_HZ = 100)
}

function upstreamPid(port: number): number {
  // the docker-registry listening on `port`
  const out = new Deno.Command("ss", { args: ["-Hltnp", `sport = :${port}`] }).outputSync();
  const m = /pid=(\d+)/.exec(new TextDecoder().decode(out.stdout));
  if (!m) throw new Error(`no process listens on ${port}`);
  return Number(m[1]);
}

interface CpuRow {
  wall: number;
  upstream: number;
  client: number;
  wharf: number;
}

/** Per-blob wall and CPU time of direct, cold and warm single-layer GETs (see 3. above). */
async function cpuPhase(upstream: { url: string; port: number }): Promise<Record<string, CpuRow>> {
  const n = SMALL ? 3 : 8;
  const upPid = upstreamPid(upstream.port);
  const digests: string[] = [];
  for (let i = 0; i < n; i++) {
    digests.push(...await pushImage(upstream.url, `library/cpu${i}`, [LAYER_MB << 20]));
  }
  const wharf = await startWharf(upstream.url);
  const rows: Record<string, CpuRow> = {};
  try {
    for (let i = 0; i < n; i++) {
      for (
        const [k, base, repo] of [
          ["direct", upstream.url, `library/cpu${i}`],
          ["wharf_cold", wharf.url, `hub/library/cpu${i}`],
          ["wharf_warm", wharf.url, `hub/library/cpu${i}`],
        ] as const
      ) {
        const before = [cpuMs(upPid), cpuMs("self"), cpuMs(wharf.pid)];
        const t0 = performance.now();
        await drain(await fetch(`${base}/v2/${repo}/blobs/${digests[i]}`), digests[i]);
        const wall = performance.now() - t0;
        const r = rows[k] ??= { wall: 0, upstream: 0, client: 0, wharf: 0 };
        r.wall += wall / n;
        r.upstream += (cpuMs(upPid) - before[0]) / n;
        r.client += (cpuMs("self") - before[1]) / n;
        r.wharf += (cpuMs(wharf.pid) - before[2]) / n;
      }
    }
  } finally {
    await wharf.stop();
  }
  return rows;
}

function vmHwmMiB(pid: number): number {
  const s = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmHWM:\s+(\d+) kB/.exec(s)![1]) / 1024;
}

async function main() {
  const upstream = await startDistribution();
  const proxy = await startDistribution({ proxy: { remoteurl: upstream.url } });
  const wharf = await startWharf(upstream.url);
  const rows: Record<string, number[]> = {
    direct: [],
    wharf_cold: [],
    wharf_warm: [],
    proxy_cold: [],
    proxy_warm: [],
  };
  let imageBytes = 0;
  try {
    for (let r = 0; r < ROUNDS; r++) {
      const repo = `library/img${r}`;
      await pushImage(upstream.url, repo, Array(3).fill(LAYER_MB << 20));
      const direct = await pullImage(upstream.url, repo);
      imageBytes = direct.bytes;
      const wc = await pullImage(wharf.url, `hub/${repo}`);
      const ww = await pullImage(wharf.url, `hub/${repo}`);
      const pc = await pullImage(proxy.url, repo);
      const pw = await pullImage(proxy.url, repo);
      for (
        const [k, v] of [
          ["direct", direct],
          ["wharf_cold", wc],
          ["wharf_warm", ww],
          ["proxy_cold", pc],
          ["proxy_warm", pw],
        ] as const
      ) {
        if (v.bytes !== direct.bytes) throw new Error(`${k}: ${v.bytes} bytes`);
        rows[k].push(v.s);
      }
      console.log(
        `round ${r + 1}: ${
          JSON.stringify(Object.fromEntries(Object.entries(rows).map(([k, v]) => [k, v[r]])))
        }`,
      );
    }
  } finally {
    await wharf.stop();
  }

  // 16 clients, one uncached blob, a fresh Wharf
  const [big] = await pushImage(upstream.url, "library/big", [BIG_MB << 20]);
  const fresh = await startWharf(upstream.url);
  let peak = 0;
  let bigS = 0;
  try {
    Deno.writeTextFileSync(`/proc/${fresh.pid}/clear_refs`, "5");
    const before = vmHwmMiB(fresh.pid);
    const t0 = performance.now();
    await Promise.all(
      Array.from(
        { length: CLIENTS },
        async () => drain(await fetch(`${fresh.url}/v2/hub/library/big/blobs/${big}`), big),
      ),
    );
    bigS = (performance.now() - t0) / 1000;
    peak = vmHwmMiB(fresh.pid);
    console.log(
      `16 × ${BIG_MB} MiB uncached: ${bigS.toFixed(2)} s, RSS ${before.toFixed(0)} → peak ${
        peak.toFixed(0)
      } MiB`,
    );
  } finally {
    await fresh.stop();
    await proxy.stop();
  }
  let cpu: Record<string, CpuRow>;
  try {
    cpu = await cpuPhase(upstream);
  } finally {
    await upstream.stop();
  }

  const mib = imageBytes / 2 ** 20;
  const med = Object.fromEntries(Object.entries(rows).map(([k, v]) => [k, median(v)]));
  const rate = (s: number) => mib / s;
  const result = {
    image_mib: mib,
    median_s: med,
    mib_per_s: Object.fromEntries(Object.entries(med).map(([k, s]) => [k, rate(s)])),
    wharf_cold_vs_direct: med.direct / med.wharf_cold,
    wharf_warm_vs_direct: med.direct / med.wharf_warm,
    wharf_vs_proxy_cold: med.proxy_cold / med.wharf_cold,
    wharf_vs_proxy_warm: med.proxy_warm / med.wharf_warm,
    rounds: rows,
    uncached_16_clients: { blob_mib: BIG_MB, seconds: bigS, peak_rss_mib: peak },
    cpu_ms_per_layer: cpu,
  };
  await Deno.mkdir(join(ROOT, "bench", "out"), { recursive: true });
  await Deno.writeTextFile(
    join(ROOT, "bench", "out", "pull_through.json"),
    JSON.stringify(result, null, 2),
  );
  const f = (n: number) => n.toFixed(2);
  console.log(`
| ${f(mib)} MiB image, median of ${ROUNDS} | s | MiB/s | vs direct |
|---|---|---|---|
| direct from docker-registry | ${f(med.direct)} | ${f(rate(med.direct))} | 1.00× |
| Wharf cold | ${f(med.wharf_cold)} | ${f(rate(med.wharf_cold))} | ${
    f(result.wharf_cold_vs_direct)
  }× |
| Wharf warm | ${f(med.wharf_warm)} | ${f(rate(med.wharf_warm))} | ${
    f(result.wharf_warm_vs_direct)
  }× |
| docker-registry proxy cold | ${f(med.proxy_cold)} | ${f(rate(med.proxy_cold))} | ${
    f(med.direct / med.proxy_cold)
  }× |
| docker-registry proxy warm | ${f(med.proxy_warm)} | ${f(rate(med.proxy_warm))} | ${
    f(med.direct / med.proxy_warm)
  }× |

Wharf vs proxy: cold ${f(result.wharf_vs_proxy_cold)}×, warm ${f(result.wharf_vs_proxy_warm)}×.
16 clients × one uncached ${BIG_MB} MiB blob: ${f(bigS)} s, Wharf peak RSS ${peak.toFixed(0)} MiB.

| one ${LAYER_MB} MiB layer GET (mean) | wall ms | CPU ms: upstream | client | Wharf | total |
|---|---|---|---|---|---|
${
    Object.entries(cpu).map(([k, r]) =>
      `| ${k} | ${r.wall.toFixed(0)} | ${r.upstream.toFixed(0)} | ${r.client.toFixed(0)} | ${
        r.wharf.toFixed(0)
      } | ${(r.upstream + r.client + r.wharf).toFixed(0)} |`
    ).join("\n")
  }
`);
}

await main();
