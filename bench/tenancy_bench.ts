// Quotas, rate limits and the audit trail (issue 26) together: push and pull throughput of
// Debian's docker-registry, Wharf with all three off, each one alone, and all three on, in one
// run, with the server CPU per operation and the KV operations per push of each Wharf. A push is
// what a client sends for a one-layer image: for each of the config and a fresh 256 KiB layer
// `POST` an upload then `PUT` it with `?digest=`, then the manifest `PUT` by tag. A pull is the
// manifest GET and both blob GETs. CONCURRENCY clients push (then pull) at once for ROUND_SECS.
//
// Each round starts every side afresh (a new process, a new data dir in one temp filesystem,
// warmed the same way), measures it alone and stops it, the sides taking turns in an order
// rotated each round (and reversed every other round). Long-lived servers measured in turns were
// not comparable: two all-off Wharfs with one config differed by 9.5–14.8% in pushes/s, the one
// started first always the faster (bench/README.md). A second all-off side (the control) still
// runs, and its per-round spread against the first is printed: a difference smaller than that is
// not resolved.
//
// Limits are set far above the load (nothing is refused): what is measured is the bookkeeping.
// Every request comes from one client IP (one identity's buckets, the ordinary case; the many-
// identities case is bench/rate_limit_bench.ts's).
//
// Run: deno run -A --unstable-kv bench/tenancy_bench.ts [--small]   (~7 minutes; --small ~1)
import { pullOnce, pushOnce } from "./image_traffic.ts";
import { startServer, type TestServer } from "../tests/helpers/server.ts";
import { type Distribution, startDistribution } from "../tests/e2e/_distribution.ts";

const small = Deno.args.includes("--small");
const CONCURRENCY = 8;
const ROUND_SECS = small ? 1 : 2;
const ROUNDS = small ? 2 : 8;
/** pushes and pulls each fresh server gets before it is measured (JIT, KV file, caches) */
const WARM_SECS = small ? 0.5 : 1;

const QUOTAS = `
[repository."bench".quota]
max_bytes = ${1024 ** 4}
[global.quota]
default_max_bytes = ${1024 ** 4}
`;
const RATE_LIMITS = `
[global.rate_limit]
pulls_per_hour = 1000000000
requests_per_second = 1000000
burst = 1000000000
`;
const AUDIT = `
[global.audit]
enabled = true
`;

interface Side {
  name: string;
  /** Wharf's TOML; null: docker-registry */
  config: string | null;
  /** this round's server: its process for CPU time (null: docker-registry) */
  url: string;
  pid: number | null;
  /** pushes/s and server CPU ms per push of each round, for the per-round spread */
  pushRates: number[];
  pushCpus: number[];
  pushes: number;
  pushSeconds: number;
  pushCpu: number;
  pulls: number;
  pullSeconds: number;
  pullCpu: number;
  kvOps: number;
  kvByOp: Map<string, number>;
}

/** User + system CPU seconds of a process so far (Linux /proc). */
function cpuSecs(pid: number): number {
  const f = Deno.readTextFileSync(`/proc/${pid}/stat`).split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) / 100;
}

/** CONCURRENCY loops of `fn` for `secs`: how many, in how long, with how much server CPU. */
async function timed(side: Side, fn: () => Promise<void>, secs = ROUND_SECS) {
  const cpu0 = side.pid ? cpuSecs(side.pid) : 0;
  const until = performance.now() + secs * 1000;
  const t0 = performance.now();
  let n = 0;
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (performance.now() < until) {
      await fn();
      n++;
    }
  }));
  const seconds = (performance.now() - t0) / 1000;
  return { n, seconds, cpu: side.pid ? cpuSecs(side.pid) - cpu0 : 0 };
}

/** `wharf_kv_operation_duration_seconds_count` by op, from a Wharf's /metrics. */
async function kvOps(url: string): Promise<Map<string, number>> {
  const t = await (await fetch(`${url}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of t.split("\n")) {
    if (!line.startsWith("wharf_kv_operation_duration_seconds_count")) continue;
    const op = line.match(/op="([^"]+)"/)?.[1] ?? "?";
    out.set(op, (out.get(op) ?? 0) + Number(line.split(" ").pop()));
  }
  return out;
}

/** tags of the measured pushes, distinct across sides and rounds */
let pushed = 0;
const configs: [string, string | null][] = [
  ["docker-registry", null],
  ["wharf, all off", ""],
  ["wharf, quotas", QUOTAS],
  ["wharf, rate limits", RATE_LIMITS],
  ["wharf, audit", AUDIT],
  ["wharf, all three", QUOTAS + RATE_LIMITS + AUDIT],
  // the same config again: what two identical sides differ by is the bench's resolution
  ["wharf, all off (control)", ""],
];
const sides: Side[] = configs.map(([name, config]) => ({
  name,
  config,
  url: "",
  pid: null,
  pushRates: [],
  pushCpus: [],
  pushes: 0,
  pushSeconds: 0,
  pushCpu: 0,
  pulls: 0,
  pullSeconds: 0,
  pullCpu: 0,
  kvOps: 0,
  kvByOp: new Map(),
}));

/** A fresh server for `s`, warmed; returns how to stop it and drop its data. */
async function startFresh(s: Side): Promise<() => Promise<void>> {
  let stop: () => Promise<void>;
  if (s.config === null) {
    const d: Distribution = await startDistribution();
    s.url = d.url;
    s.pid = null;
    stop = () => d.stop();
  } else {
    const w: TestServer = await startServer({
      unchecked: true,
      config: s.config,
    });
    s.url = w.url;
    s.pid = w.pid;
    stop = async () => {
      await w.stop().catch(() => {});
      await Deno.remove(w.dataDir, { recursive: true }).catch(() => {});
    };
  }
  try {
    let img = await pushOnce(s.url, "warm");
    await timed(s, async () => {
      img = await pushOnce(s.url, `w${pushed++}`);
      await pullOnce(s.url, img);
    }, WARM_SECS);
  } catch (e) {
    await stop();
    throw e;
  }
  return stop;
}

const load0 = Deno.loadavg()[0];
const t0 = new Date();
for (let r = 0; r < ROUNDS; r++) {
  // Rotated each round, and reversed every other round, so each side follows a different side
  // from round to round: in one fixed cycle the control always came after "all three" and
  // all-off after docker-registry, and the control's CPU per push was higher in 7 of 8 rounds.
  const order = sides.map((_, i) => sides[(i + r) % sides.length]);
  if (r % 2 === 1) order.reverse();
  for (const s of order) {
    const stop = await startFresh(s);
    try {
      const before = s.pid ? await kvOps(s.url) : null;
      const p = await timed(s, async () => {
        await pushOnce(s.url, `t${pushed++}`);
      });
      if (before) {
        for (const [op, n] of await kvOps(s.url)) {
          const d = n - (before.get(op) ?? 0);
          s.kvByOp.set(op, (s.kvByOp.get(op) ?? 0) + d);
          s.kvOps += d;
        }
      }
      s.pushes += p.n;
      s.pushSeconds += p.seconds;
      s.pushCpu += p.cpu;
      s.pushRates.push(p.n / p.seconds);
      s.pushCpus.push((p.cpu / p.n) * 1000);
      const img = await pushOnce(s.url, "pulled");
      const q = await timed(s, () => pullOnce(s.url, img));
      s.pulls += q.n;
      s.pullSeconds += q.seconds;
      s.pullCpu += q.cpu;
    } finally {
      await stop();
    }
  }
}
console.log(
  `tenancy bench, ${t0.toISOString().slice(0, 16)}–${
    new Date().toISOString().slice(11, 16)
  } UTC, load average ${load0.toFixed(1)} → ${Deno.loadavg()[0].toFixed(1)}: ` +
    `${CONCURRENCY} concurrent clients, push = config + 256 KiB layer (POST+PUT each) + ` +
    `manifest PUT, pull = manifest + 2 blob GETs; ${ROUNDS} rounds of ${ROUND_SECS} s per side ` +
    `and direction, every side started fresh each round in a rotated (every other round reversed) order\n`,
);
console.log(
  "| side | pushes/s | vs off | CPU ms / push | vs off | pulls/s | vs off | CPU ms / pull | vs off | KV ops / push (by op) |",
);
console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
const off = sides[1];
const pct = (a: number, b: number) => `${(((a - b) / b) * 100).toFixed(1)}%`;
const rate = (s: Side) => [s.pushes / s.pushSeconds, s.pulls / s.pullSeconds];
const cpu = (s: Side) => [(s.pushCpu / s.pushes) * 1000, (s.pullCpu / s.pulls) * 1000];
for (const [i, s] of sides.entries()) {
  const wharf = s.config !== null;
  const [push, pull] = rate(s);
  const [cpush, cpull] = cpu(s);
  const vs = (a: number, b: number) => i === 0 ? "–" : pct(a, b);
  const byOp = [...s.kvByOp.entries()].filter(([, n]) => n > 0).sort()
    .map(([op, n]) => `${op} ${(n / s.pushes).toFixed(2)}`).join(", ");
  console.log(
    `| ${s.name} | ${push.toFixed(1)} | ${vs(push, rate(off)[0])} | ${
      wharf ? cpush.toFixed(2) : "–"
    } | ${wharf ? vs(cpush, cpu(off)[0]) : "–"} | ${pull.toFixed(0)} | ${
      vs(pull, rate(off)[1])
    } | ${wharf ? cpull.toFixed(3) : "–"} | ${wharf ? vs(cpull, cpu(off)[1]) : "–"} | ${
      wharf ? `${(s.kvOps / s.pushes).toFixed(1)} (${byOp})` : "–"
    } |`,
  );
}
// Rounds are paired (one round's sides run back to back), so the control's per-round ratio to
// all-off is the noise any one feature's figure carries.
const control = sides[sides.length - 1];
const perRound = (of: (s: Side) => number[]) =>
  of(off).map((x, r) => pct(of(control)[r], x)).join(", ");
console.log(`\ncontrol vs all off, pushes/s per round: ${perRound((s) => s.pushRates)}`);
console.log(`control vs all off, CPU ms / push per round: ${perRound((s) => s.pushCpus)}`);
