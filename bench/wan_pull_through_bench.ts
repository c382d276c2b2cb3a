// Pull-through over a shaped link (issue 25): the upstream docker-registry runs in the network
// namespace of ../shared/tools/wan-ns.sh (198.18.0.2, behind RATE and RTT both ways); Wharf,
// docker-registry as a proxy and the client stay on loopback. For a big-layer image (3 × 33 MiB)
// and a small-layer image (50 × ~200 KiB), each round with a fresh image: direct from the
// upstream, through Wharf cold then warm, through the proxy cold then warm; median of 3 rounds.
// Reports MiB/s, ratios to direct, Wharf's CPU (utime+stime from /proc) per 100 MiB of cold pull
// and Wharf's KV operations per blob (wharf_kv_operation_duration_seconds_count by op, minus what
// reading /metrics costs). The link is always taken down at the end.
//
// Run (root: it creates a netns): deno run -A --unstable-kv bench/wan_pull_through_bench.ts
//   [--rate 1gbit] [--rtt 10] [--prefetch <prefetch_max_bytes>]
import { join } from "node:path";
import { pullImage, pushImage, randomBytes, upload } from "./image_traffic.ts";
import { fileURLToPath } from "node:url";
import { startDistribution } from "../tests/e2e/_distribution.ts";
import { startServer, type TestServer } from "../tests/helpers/server.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
const WAN = join(ROOT, "..", "shared", "tools", "wan-ns.sh");
const arg = (name: string, dflt: string) => {
  const i = Deno.args.indexOf(name);
  return i >= 0 ? Deno.args[i + 1] : dflt;
};
const RATE = arg("--rate", "1gbit");
const RTT = Number(arg("--rtt", "10"));
/** `prefetch_max_bytes` of the Wharf side (unset: the default, 4 MiB; 0: no prefetch) */
const PREFETCH = arg("--prefetch", "");
const ROUNDS = 3;
const UPSTREAM_PORT = 5000;
const IMAGES = [
  { name: "big", layers: Array(3).fill(33 << 20) as number[] },
  { name: "small", layers: Array(50).fill(200 << 10) as number[] },
];

function wan(...args: string[]): void {
  const r = new Deno.Command("bash", { args: [WAN, ...args], stderr: "inherit" }).outputSync();
  if (!r.success && args[0] === "up") throw new Error(`wan-ns.sh ${args.join(" ")} failed`);
}

/** Milliseconds from a blob GET to the first body byte (the rest is drained). */
async function firstByteMs(url: string): Promise<number> {
  const t0 = performance.now();
  const r = await fetch(url);
  if (r.status !== 200) throw new Error(`${url}: ${r.status}`);
  const reader = r.body!.getReader();
  await reader.read();
  const ms = performance.now() - t0;
  while (!(await reader.read()).done);
  return ms;
}

function cpuMs(pid: number): number {
  const f = Deno.readTextFileSync(`/proc/${pid}/stat`).split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) * 10; // clock ticks (USER_HZ = 100)
}

async function kvOps(s: TestServer): Promise<Record<string, number>> {
  const t = await (await fetch(`${s.url}/metrics`)).text();
  const out: Record<string, number> = {};
  for (const m of t.matchAll(/^wharf_kv_operation_duration_seconds_count\{op="(\w+)"\} (\S+)$/gm)) {
    out[m[1]] = Number(m[2]);
  }
  return out;
}

const diff = (a: Record<string, number>, b: Record<string, number>) =>
  Object.fromEntries(Object.keys(b).map((k) => [k, b[k] - (a[k] ?? 0)]).filter(([, v]) => v));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Row = "direct" | "wharf_cold" | "wharf_warm" | "proxy_cold" | "proxy_warm";

async function main() {
  wan("down");
  wan("up", RATE, String(RTT));
  const load = Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
  // docker-registry inside the namespace, on the far side of the link
  const upstream = await startDistribution({
    netns: "wharfwan",
    address: "198.18.0.2",
    port: UPSTREAM_PORT,
  });
  const proxy = await startDistribution({ proxy: { remoteurl: upstream.url } });
  const wharf = await startServer({
    config: `[repository."hub"]\n${
      PREFETCH === "" ? "" : `prefetch_max_bytes = ${Number(PREFETCH)}\n`
    }[[repository."hub".upstream]]\nurl = "${upstream.url}"\n`,
    unchecked: true,
  });
  const results: Record<string, unknown> = {
    rate: RATE,
    rtt_ms: RTT,
    prefetch_max_bytes: PREFETCH === "" ? "default" : Number(PREFETCH),
    load_before: load,
  };
  try {
    for (const img of IMAGES) {
      const rows: Record<Row, number[]> = {
        direct: [],
        wharf_cold: [],
        wharf_warm: [],
        proxy_cold: [],
        proxy_warm: [],
      };
      const cpu: number[] = [];
      const ttfb: { direct: number[]; wharf_cold: number[] } = { direct: [], wharf_cold: [] };
      let ops: Record<string, number>[] = [];
      let warmOps: Record<string, number>[] = [];
      let bytes = 0;
      for (let r = 0; r < ROUNDS; r++) {
        const repo = `library/${img.name}${r}`;
        await pushImage(upstream.url, repo, img.layers);
        const direct = await pullImage(upstream.url, repo);
        bytes = direct.bytes;
        const k0 = await kvOps(wharf);
        const k1 = await kvOps(wharf); // what one /metrics read costs
        const c0 = cpuMs(wharf.pid);
        const wc = await pullImage(wharf.url, `hub/${repo}`);
        cpu.push(cpuMs(wharf.pid) - c0);
        await sleep(300); // the fills' job deletions land after the bodies
        const k2 = await kvOps(wharf);
        const ww = await pullImage(wharf.url, `hub/${repo}`);
        await sleep(300);
        const k3 = await kvOps(wharf);
        const perRead = diff(k0, k1);
        const less = (d: Record<string, number>) =>
          Object.fromEntries(Object.entries(d).map(([k, v]) => [k, v - (perRead[k] ?? 0)]));
        ops = [...ops, less(diff(k1, k2))];
        warmOps = [...warmOps, less(diff(k2, k3))];
        // Time to first byte of one more cold blob of the image's layer size.
        const lone = await upload(upstream.url, repo, randomBytes(img.layers[0]));
        ttfb.direct.push(await firstByteMs(`${upstream.url}/v2/${repo}/blobs/${lone}`));
        ttfb.wharf_cold.push(await firstByteMs(`${wharf.url}/v2/hub/${repo}/blobs/${lone}`));
        const pc = await pullImage(proxy.url, repo);
        const pw = await pullImage(proxy.url, repo);
        const got = { direct, wharf_cold: wc, wharf_warm: ww, proxy_cold: pc, proxy_warm: pw };
        for (const [k, v] of Object.entries(got) as [Row, { s: number; bytes: number }][]) {
          if (v.bytes !== direct.bytes) throw new Error(`${img.name} ${k}: ${v.bytes} bytes`);
          rows[k].push(v.s);
        }
        console.log(
          `${img.name} round ${r + 1}: ${
            JSON.stringify(
              Object.fromEntries(Object.entries(rows).map(([k, v]) => [k, +v[r].toFixed(3)])),
            )
          }`,
        );
      }
      const mib = bytes / 2 ** 20;
      const med = Object.fromEntries(
        Object.entries(rows).map(([k, v]) => [k, median(v)]),
      ) as Record<Row, number>;
      const blobs = img.layers.length + 1;
      const perBlob = (all: Record<string, number>[]) => {
        const keys = new Set(all.flatMap((o) => Object.keys(o)));
        return Object.fromEntries(
          [...keys].map((k) => [k, +(median(all.map((o) => o[k] ?? 0)) / blobs).toFixed(2)]),
        );
      };
      results[img.name] = {
        image_mib: mib,
        blobs,
        median_s: med,
        mib_per_s: Object.fromEntries(Object.entries(med).map(([k, s]) => [k, mib / s])),
        vs_direct: Object.fromEntries(Object.entries(med).map(([k, s]) => [k, med.direct / s])),
        wharf_cold_cpu_ms_per_100_mib: median(cpu) / mib * 100,
        kv_ops_per_blob_cold: perBlob(ops),
        kv_ops_per_blob_warm: perBlob(warmOps),
        ttfb_ms: { direct: median(ttfb.direct), wharf_cold: median(ttfb.wharf_cold) },
        rounds: rows,
      };
    }
  } finally {
    await wharf.stop();
    await Deno.remove(wharf.dataDir, { recursive: true }).catch(() => {});
    await proxy.stop();
    await upstream.stop();
    wan("down");
  }
  results.load_after = Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
  await Deno.mkdir(join(ROOT, "bench", "out"), { recursive: true });
  await Deno.writeTextFile(
    join(ROOT, "bench", "out", "wan_pull_through.json"),
    JSON.stringify(results, null, 2),
  );
  const f = (n: number) => n.toFixed(2);
  for (const img of IMAGES) {
    // deno-lint-ignore no-explicit-any
    const r = results[img.name] as any;
    console.log(
      `\n| ${img.name}: ${
        f(r.image_mib)
      } MiB, ${r.blobs} blobs, ${RATE} / ${RTT} ms, median of ${ROUNDS} | s | MiB/s | vs direct |
|---|---|---|---|
${
        (["direct", "wharf_cold", "wharf_warm", "proxy_cold", "proxy_warm"] as Row[]).map((k) =>
          `| ${k} | ${f(r.median_s[k])} | ${f(r.mib_per_s[k])} | ${f(r.vs_direct[k])}× |`
        ).join("\n")
      }

Time to first byte of one cold blob (median): direct ${f(r.ttfb_ms.direct)} ms, through Wharf ${
        f(r.ttfb_ms.wharf_cold)
      } ms.
Wharf CPU per 100 MiB cold: ${
        r.wharf_cold_cpu_ms_per_100_mib.toFixed(0)
      } ms. KV operations per blob (manifest's share included): cold ${
        JSON.stringify(r.kv_ops_per_blob_cold)
      }, warm ${JSON.stringify(r.kv_ops_per_blob_warm)}.`,
    );
  }
  console.log(`load before ${load}, after ${results.load_after}`);
}

await main();
