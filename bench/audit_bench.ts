// The audit trail (issue 26 §4, Performance), side by side in one run: image push throughput
// (16 concurrent clients; each push is a small config blob and a small layer, each a two-step
// upload, then the manifest PUT by tag) for Wharf with the trail off, Wharf with
// `[global.audit] enabled = true`, and Debian's docker-registry (distribution 2.8) as the
// reference. The three servers run at the same time and bursts of BURST pushes rotate between
// them (A B C, B C A, …), so each side sees the same moments of a machine whose speed drifts;
// each side's pushes/s is its pushes over the time of its bursts, and its server CPU per push
// (from /proc) is measured over the same bursts. KV operations per push are
// counted from each Wharf's /metrics (wharf_kv_operation_duration_seconds_count by op); the
// trail adds no operation to a push, only one `set` per record inside commits it already makes.
// Run: deno run -A --unstable-kv bench/audit_bench.ts [--small]   (loopback only)
import { createHash } from "node:crypto";
import { join } from "node:path";
import { wharfCommand } from "../tests/helpers/launch.ts";

const SMALL = Deno.args.includes("--small");
const PUSHES = SMALL ? 300 : Number(Deno.env.get("BENCH_PUSHES") ?? 1800);
const BURST = SMALL ? 100 : 200;
const CONCURRENCY = 16;

interface Server {
  label: string;
  url: string;
  pid: number;
  wharf: boolean;
  stop(): Promise<void>;
}

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const p = (l.addr as Deno.NetAddr).port;
  l.close();
  return p;
}

async function waitUp(url: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    try {
      const r = await fetch(`${url}/v2/`);
      await r.body?.cancel();
      return;
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  throw new Error(`${url} did not come up`);
}

function spawned(
  label: string,
  url: string,
  child: Deno.ChildProcess,
  dir: string,
  wharf: boolean,
) {
  return {
    label,
    url,
    pid: child.pid,
    wharf,
    stop: async () => {
      child.kill("SIGTERM");
      await child.status;
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

async function startWharf(label: string, extra: string): Promise<Server> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-audit-bench-" });
  const port = freePort();
  const config = join(dir, "wharf.toml");
  // Indexing and scanning off: they would add background work unrelated to the trail.
  await Deno.writeTextFile(
    config,
    `[server]\nbind_address = "127.0.0.1"\nport = ${port}\n[blob_store.fs]\nroot_dir = "${dir}/blobs"\n[metadata_store]\npath = "${dir}/m.kv"\n[global.index]\non_push = "none"\n[scan]\non_push = false\n${extra}`,
  );
  const child = wharfCommand(["serve", "-c", config], {
    stdout: "null",
    stderr: "null",
    env: { NO_COLOR: "1", RUST_BACKTRACE: "0" },
  }).spawn();
  const url = `http://127.0.0.1:${port}`;
  await waitUp(url);
  return spawned(label, url, child, dir, true);
}

async function startDistribution(): Promise<Server> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-audit-bench-dist-" });
  const port = freePort();
  const config = join(dir, "config.yml");
  await Deno.writeTextFile(
    config,
    `version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: ${dir}/data\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:${port}\n`,
  );
  const child = new Deno.Command("docker-registry", {
    args: ["serve", config],
    stdout: "null",
    stderr: "null",
  }).spawn();
  const url = `http://127.0.0.1:${port}`;
  await waitUp(url);
  return spawned("docker-registry", url, child, dir, false);
}

const sha = (b: Uint8Array) => `sha256:${createHash("sha256").update(b).digest("hex")}`;
const enc = new TextEncoder();
const MT = "application/vnd.oci.image.manifest.v1+json";

/** Two-step upload: docker-registry 2.8 does not take a monolithic POST. */
async function pushBlob(url: string, ns: string, data: Uint8Array): Promise<string> {
  const digest = sha(data);
  const start = await fetch(`${url}/v2/${ns}/blobs/uploads/`, { method: "POST" });
  await start.body?.cancel();
  const loc = new URL(start.headers.get("location")!, url);
  loc.searchParams.set("digest", digest);
  const r = await fetch(loc, { method: "PUT", body: data as BodyInit });
  await r.body?.cancel();
  if (r.status !== 201) throw new Error(`blob push: ${r.status}`);
  return digest;
}

async function pushImage(url: string, ns: string, tag: string): Promise<void> {
  const cfg = enc.encode(JSON.stringify({ os: "linux", architecture: "amd64", tag }));
  const layer = enc.encode(`layer ${tag} ${crypto.randomUUID()}`);
  const [c, l] = [await pushBlob(url, ns, cfg), await pushBlob(url, ns, layer)];
  const body = JSON.stringify({
    schemaVersion: 2,
    mediaType: MT,
    config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: c, size: cfg.length },
    layers: [{
      mediaType: "application/vnd.oci.image.layer.v1.tar+gzip",
      digest: l,
      size: layer.length,
    }],
  });
  const r = await fetch(`${url}/v2/${ns}/manifests/${tag}`, {
    method: "PUT",
    body,
    headers: { "content-type": MT },
  });
  await r.body?.cancel();
  if (r.status !== 201) throw new Error(`manifest push ${tag}: ${r.status}`);
}

async function burst(s: Server, from: number, to: number): Promise<number> {
  let next = from;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    for (let i = next++; i < to; i = next++) await pushImage(s.url, "bench/app", `t${i}`);
  }));
  return (performance.now() - t0) / 1000;
}

/** CPU time (user + system) a process has used, in ms, from /proc (clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const f = Deno.readTextFileSync(`/proc/${pid}/stat`).split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
}

/** KV operations so far by op, from /metrics. */
async function kvOps(s: Server): Promise<Map<string, number>> {
  const text = await (await fetch(`${s.url}/metrics`)).text();
  const out = new Map<string, number>();
  for (
    const m of text.matchAll(/^wharf_kv_operation_duration_seconds_count\{op="([^"]+)"\} (\d+)/gm)
  ) {
    out.set(m[1], Number(m[2]));
  }
  return out;
}

const servers = [
  await startWharf("wharf", ""),
  await startWharf("wharf+audit", "[global.audit]\nenabled = true\n"),
  await startDistribution(),
];
try {
  const secs = servers.map(() => 0);
  // CPU is steadier than wall time on a shared machine: other processes take turns, not cycles.
  const cpu = servers.map(() => 0);
  /** per round: the audit side's time over the plain side's, as an overhead in % */
  const rounds: string[] = [];
  const ops0 = await Promise.all(servers.map((s) => s.wharf ? kvOps(s) : new Map()));
  for (let b = 0, from = 0; from < PUSHES; b++, from += BURST) {
    const to = Math.min(PUSHES, from + BURST);
    const took = servers.map(() => 0);
    for (let k = 0; k < servers.length; k++) {
      const i = (b + k) % servers.length;
      const c0 = cpuMs(servers[i].pid);
      took[i] = await burst(servers[i], from, to);
      cpu[i] += cpuMs(servers[i].pid) - c0;
      secs[i] += took[i];
    }
    rounds.push(((took[1] / took[0] - 1) * 100).toFixed(0));
  }
  const ops1 = await Promise.all(servers.map((s) => s.wharf ? kvOps(s) : new Map()));
  console.log(
    `\n| ${PUSHES} image pushes per side (2 blobs + manifest), ${CONCURRENCY} clients, bursts of ${BURST} | pushes/s | server CPU ms/push | KV ops per push (by op) |`,
  );
  console.log("| --- | --- | --- | --- |");
  for (const [i, s] of servers.entries()) {
    let ops = "n/a";
    if (s.wharf) {
      const by = [...ops1[i]].map(([op, n]) => [op, n - (ops0[i].get(op) ?? 0)] as const)
        .filter(([, n]) => n > 0);
      const total = by.reduce((a, [, n]) => a + n, 0);
      ops = `${(total / PUSHES).toFixed(2)} (${
        by.map(([op, n]) => `${op} ${(n / PUSHES).toFixed(2)}`).join(", ")
      })`;
    }
    const perPush = (cpu[i] / PUSHES).toFixed(2);
    console.log(`| ${s.label} | ${(PUSHES / secs[i]).toFixed(0)} | ${perPush} | ${ops} |`);
  }
  console.log(
    `| audit overhead (wharf+audit vs wharf) | **${
      ((secs[1] / secs[0] - 1) * 100).toFixed(1)
    }%** | **${((cpu[1] / cpu[0] - 1) * 100).toFixed(1)}%** | per round (time): ${
      rounds.join(", ")
    }% |`,
  );
  // Each push recorded: 2 blob.push, 1 manifest.push, 1 tag.create.
  const r = await fetch(`${servers[1].url}/v2/_svc/audit?n=1000&action=manifest.push`);
  const body = await r.json();
  console.log(
    `audit records of manifest pushes (first page, at most 1000): ${body.records.length}`,
  );
} finally {
  await Promise.all(servers.map((s) => s.stop()));
}
