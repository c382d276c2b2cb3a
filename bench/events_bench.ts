// Event webhooks and retention (issue 14, Performance), side by side in one run:
// 1. manifest push ops/s (16 concurrent clients, distinct small manifests, one shared config
//    blob) without and with one async webhook (a receiver here answering 204), for Wharf and
//    for Debian's docker-registry (distribution 2.8, `notifications.endpoints`). The server
//    without and the server with the webhook run at the same time, idle but for the pushes
//    sent to one of them: bursts of BURST pushes alternate between the two (A B, B A, …), and
//    each side's ops/s is its pushes over the time of its bursts. Short alternating bursts put
//    both sides through the same moments of a machine whose speed drifts by ±20% from one
//    second to the next; separate runs seconds apart did not (their ratio swung by ±10 points).
//    After a burst to the webhook side the next burst waits until the receiver holds every
//    event, so no delivery is left to run during the other side's burst. CPU time per push
//    (server, from /proc, deliveries included; and this process: clients + receiver) is
//    reported too;
// 2. prune of 10,000 tags (100 manifests × 100 tags) by `main.ts prune`, dry run and real.
// Run: deno run -A --unstable-kv bench/events_bench.ts [--small] [--prune-only]   (loopback only)
import { createHash } from "node:crypto";
import { join } from "node:path";
import { wharfCommand } from "../tests/helpers/launch.ts";

const SMALL = Deno.args.includes("--small");
/** `--prune-only`: skip the push comparison */
const PRUNE_ONLY = Deno.args.includes("--prune-only");
/** pushes per side, in bursts of BURST */
const PUSHES = SMALL ? 600 : Number(Deno.env.get("BENCH_PUSHES") ?? 3000);
const BURST = SMALL ? 200 : 500;
const CONCURRENCY = 16;
const PRUNE_MANIFESTS = SMALL ? 20 : 100;
const TAGS_PER_MANIFEST = 100;
/** extra TOML with the webhook (e.g. a job queue setting), from WHARF_BENCH_HOOK_EXTRA */
const HOOK_EXTRA = (Deno.env.get("WHARF_BENCH_HOOK_EXTRA") ?? "").replaceAll("\\n", "\n");

interface Server {
  url: string;
  dir: string;
  config: string;
  pid: number;
  stop(): Promise<void>;
}

/** CPU ms per thread name of a process (BENCH_THREADS=1 prints each run's split). */
function threadCpu(pid: number): Map<string, number> {
  const by = new Map<string, number>();
  for (const t of Deno.readDirSync(`/proc/${pid}/task`)) {
    try {
      const st = Deno.readTextFileSync(`/proc/${pid}/task/${t.name}/stat`);
      const name = st.slice(st.indexOf("(") + 1, st.lastIndexOf(")"));
      const f = st.slice(st.lastIndexOf(")") + 2).split(" ");
      by.set(name, (by.get(name) ?? 0) + (Number(f[11]) + Number(f[12])) * 10);
    } catch { /* the thread ended */ }
  }
  return by;
}

function threadSplit(before: Map<string, number>, after: Map<string, number>): string {
  return [...after].map(([n, ms]) => [n, ms - (before.get(n) ?? 0)] as const)
    .filter(([, ms]) => ms > 0).sort((a, b) => b[1] - a[1])
    .map(([n, ms]) => `${n} ${(ms / PUSHES).toFixed(3)}`).join(", ");
}

/** CPU time (user + system) a process has used, in ms, from /proc (clock ticks of 10 ms). */
function cpuMs(pid: number | "self"): number {
  const f = Deno.readTextFileSync(`/proc/${pid}/stat`).split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
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

async function startWharf(extra: string): Promise<Server> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-events-bench-" });
  const port = freePort();
  const config = join(dir, "wharf.toml");
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
  return {
    url,
    dir,
    config,
    pid: child.pid,
    stop: async () => {
      child.kill("SIGTERM");
      await child.status;
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

async function startDistribution(receiver: string | null): Promise<Server> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-events-bench-dist-" });
  const port = freePort();
  const config = join(dir, "config.yml");
  const notify = receiver
    ? `notifications:\n  endpoints:\n    - name: bench\n      url: ${receiver}\n      timeout: 1s\n      threshold: 5\n      backoff: 1s\n`
    : "";
  await Deno.writeTextFile(
    config,
    `version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: ${dir}/data\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:${port}\n${notify}`,
  );
  const child = new Deno.Command("docker-registry", {
    args: ["serve", config],
    stdout: "null",
    stderr: "null",
  }).spawn();
  const url = `http://127.0.0.1:${port}`;
  await waitUp(url);
  return {
    url,
    dir,
    config,
    pid: child.pid,
    stop: async () => {
      child.kill("SIGTERM");
      await child.status;
      await Deno.remove(dir, { recursive: true }).catch(() => {});
    },
  };
}

const sha = (b: Uint8Array) => `sha256:${createHash("sha256").update(b).digest("hex")}`;
const enc = new TextEncoder();
const MT = "application/vnd.oci.image.manifest.v1+json";

async function pushConfig(url: string, ns: string): Promise<{ digest: string; size: number }> {
  const data = enc.encode(JSON.stringify({ os: "linux", architecture: "amd64" }));
  const digest = sha(data);
  // Two-step upload: docker-registry 2.8 does not take a monolithic POST.
  const start = await fetch(`${url}/v2/${ns}/blobs/uploads/`, { method: "POST" });
  await start.body?.cancel();
  const loc = new URL(start.headers.get("location")!, url);
  loc.searchParams.set("digest", digest);
  const r = await fetch(loc, { method: "PUT", body: data as BodyInit });
  await r.body?.cancel();
  if (r.status !== 201) throw new Error(`config push: ${r.status}`);
  return { digest, size: data.length };
}

function manifest(config: { digest: string; size: number }, i: number, run: string): string {
  return JSON.stringify({
    schemaVersion: 2,
    mediaType: MT,
    config: { mediaType: "application/vnd.oci.image.config.v1+json", ...config },
    layers: [],
    annotations: { "bench.run": run, "bench.i": String(i) },
  });
}

/** Pushes manifests `from`..`to` - 1 (distinct), CONCURRENCY at once; returns the seconds taken. */
async function pushBurst(
  url: string,
  ns: string,
  run: string,
  config: { digest: string; size: number },
  from: number,
  to: number,
): Promise<number> {
  let next = from;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    for (let i = next++; i < to; i = next++) {
      const r = await fetch(`${url}/v2/${ns}/manifests/t${i}`, {
        method: "PUT",
        body: manifest(config, i, run),
        headers: { "content-type": MT },
      });
      await r.body?.cancel();
      if (r.status !== 201) throw new Error(`push ${i}: ${r.status}`);
    }
  }));
  return (performance.now() - t0) / 1000;
}

/** A receiver counting manifest push events (Wharf's kind, or distribution's envelope). */
function receiver() {
  let pushes = 0;
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const body = await req.text();
    try {
      const j = JSON.parse(body);
      if (j.kind === "manifest.push") pushes++;
      for (const e of j.events ?? []) {
        if (e.action === "push" && String(e.target?.mediaType).includes("manifest")) pushes++;
      }
    } catch { /* not JSON */ }
    return new Response(null, { status: 204 });
  });
  return {
    url: `http://127.0.0.1:${(server.addr as Deno.NetAddr).port}/`,
    count: () => pushes,
    reset: () => pushes = 0,
    stop: () => server.shutdown(),
  };
}

async function drained(rx: ReturnType<typeof receiver>, want: number, t0: number) {
  const end = performance.now() + 120_000;
  while (rx.count() < want && performance.now() < end) {
    await new Promise((r) => setTimeout(r, 20));
  }
  return { got: rx.count(), seconds: (performance.now() - t0) / 1000 };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const rx = receiver();
const summary: string[] = [];
const pairs: [string, (hook: boolean) => Promise<Server>][] = [
  ["wharf", (hook) =>
    startWharf(
      hook
        ? `[event_webhook.bench]\nurl = "${rx.url}"\nevents = ["manifest.push"]\n${HOOK_EXTRA}`
        : "",
    )],
  ["distribution", (hook) => startDistribution(hook ? rx.url : null)],
];
for (const [name, start] of PRUNE_ONLY ? [] : pairs) {
  const plain = await start(false);
  const hooked = await start(true);
  try {
    const sides = [
      { label: name, s: plain, hook: false, secs: 0, server: 0, bench: 0, lag: [] as number[] },
      { label: `${name}+webhook`, s: hooked, hook: true, secs: 0, server: 0, bench: 0, lag: [] },
    ];
    const configs = await Promise.all(sides.map((x) => pushConfig(x.s.url, "bench/app")));
    const ratios: number[] = [];
    const threads0 = sides.map((x) => threadCpu(x.s.pid));
    for (let b = 0, from = 0; from < PUSHES; b++, from += BURST) {
      const to = Math.min(PUSHES, from + BURST);
      const took: number[] = [0, 0];
      for (const k of b % 2 === 0 ? [0, 1] : [1, 0]) {
        const x = sides[k];
        rx.reset();
        const cpu0 = [cpuMs(x.s.pid), cpuMs("self")];
        const t0 = performance.now();
        took[k] = await pushBurst(x.s.url, "bench/app", `${x.label}-${b}`, configs[k], from, to);
        if (x.hook) {
          const d = await drained(rx, to - from, t0);
          if (d.got < to - from) throw new Error(`${x.label}: ${d.got}/${to - from} events`);
          x.lag.push(d.seconds - took[k]);
        }
        x.secs += took[k];
        x.server += cpuMs(x.s.pid) - cpu0[0];
        x.bench += cpuMs("self") - cpu0[1];
      }
      ratios.push(took[0] / took[1]);
    }
    for (const [k, x] of sides.entries()) {
      const line = `| ${x.label} | ${(PUSHES / x.secs).toFixed(0)} | ${
        (x.server / PUSHES).toFixed(3)
      } | ${(x.bench / PUSHES).toFixed(3)} |`;
      summary.push(line);
      if (Deno.env.get("BENCH_THREADS")) {
        console.log(
          `  ${x.label} server CPU ms per push by thread: ${
            threadSplit(threads0[k], threadCpu(x.s.pid))
          }`,
        );
      }
    }
    const [a, w] = sides;
    const overhead = (1 - a.secs / w.secs) * 100;
    const perBurst = ratios.map((r) => ((1 - r) * 100).toFixed(0)).join(", ");
    const cpu = ((w.server + w.bench) / (a.server + a.bench) - 1) * 100;
    summary.push(
      `| ${name}: webhook overhead | **${overhead.toFixed(1)}%** (bursts: ${perBurst}%) | +${
        cpu.toFixed(1)
      }% CPU per push (server + bench) | events all received, ${
        median(w.lag).toFixed(2)
      } s (median) after a burst's last push |`,
    );
  } finally {
    await plain.stop();
    await hooked.stop();
  }
}
if (!PRUNE_ONLY) {
  console.log(
    `\n| ${PUSHES} manifest pushes per side, ${CONCURRENCY} clients, bursts of ${BURST} | pushes/s | server CPU ms/push | bench CPU ms/push |`,
  );
  console.log("| --- | --- | --- | --- |");
  for (const r of summary) console.log(r);
}
await rx.stop();

// Prune: PRUNE_MANIFESTS manifests × TAGS_PER_MANIFEST tags, every tag but `keep-*` goes.
{
  const s = await startWharf(
    `[global.retention_policy]\nrules = ['image.tag.startsWith("keep")']\n`,
  );
  try {
    const config = await pushConfig(s.url, "prune/app");
    for (let m = 0; m < PRUNE_MANIFESTS; m++) {
      const body = manifest(config, m, "prune");
      const qs = Array.from({ length: TAGS_PER_MANIFEST }, (_, t) => `tag=m${m}-t${t}`).join("&");
      const r = await fetch(`${s.url}/v2/prune/app/manifests/${sha(enc.encode(body))}?${qs}`, {
        method: "PUT",
        body,
        headers: { "content-type": MT },
      });
      await r.body?.cancel();
      if (r.status !== 201) throw new Error(`prune setup push ${m}: ${r.status}`);
    }
    const tags = PRUNE_MANIFESTS * TAGS_PER_MANIFEST;
    for (const dry of [true, false]) {
      const t0 = performance.now();
      const out = await wharfCommand(["prune", ...(dry ? ["--dry-run"] : []), "-c", s.config], {
        stdout: "piped",
        stderr: "piped",
        env: { NO_COLOR: "1", RUST_BACKTRACE: "0" },
      }).output();
      const wall = (performance.now() - t0) / 1000;
      const text = new TextDecoder().decode(out.stdout);
      const summary = text.trim().split("\n").at(-1) ?? "";
      const secs = Number(/in ([\d.]+) s$/.exec(summary)?.[1] ?? NaN);
      console.log(
        `prune${dry ? " --dry-run" : ""} of ${tags} tags: ${(tags / secs).toFixed(0)} tags/s (${
          secs.toFixed(2)
        } s in prune, ${wall.toFixed(2)} s with process start)\n  ${summary}`,
      );
      if (!out.success) console.log(new TextDecoder().decode(out.stderr).slice(-2000));
    }
  } finally {
    await s.stop();
  }
}
