// Quotas (issue 26, part 1): push and pull throughput with a quota on the pushed repository
// (large enough never to refuse) beside quotas off and beside Debian's docker-registry, in one
// run, and the KV operations per push with and without. A push is what a client sends for a
// one-layer image: for each of the config and a fresh 256 KiB layer `POST` an upload then `PUT`
// it with `?digest=`, then the manifest `PUT`. A pull is the manifest GET and both blob GETs.
// CONCURRENCY clients push (then pull) at once for ROUND_SECS, the servers taking turns round
// after round, in a rotated order, so the load other agents put on this shared machine (and the
// background work one side's pushes leave) falls on every side alike.
//
// Run: deno run -A --unstable-kv bench/quota_bench.ts [--small] [--quotas-first] [--control]
import { pullOnce, pushOnce } from "./image_traffic.ts";
import { startServer, type TestServer } from "../tests/helpers/server.ts";
import { type Distribution, startDistribution } from "../tests/e2e/_distribution.ts";

const small = Deno.args.includes("--small");
const quotasFirst = Deno.args.includes("--quotas-first");
const control = Deno.args.includes("--control");
const CONCURRENCY = 8;
const ROUND_SECS = small ? 2 : 3;
const ROUNDS = small ? 2 : 8;

interface Side {
  name: string;
  url: string;
  metrics: boolean;
  pushes: number;
  pushSeconds: number;
  pulls: number;
  pullSeconds: number;
  kvPerPush: number;
}

async function timed(fn: () => Promise<void>): Promise<{ n: number; seconds: number }> {
  const until = performance.now() + ROUND_SECS * 1000;
  const t0 = performance.now();
  let n = 0;
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (performance.now() < until) {
      await fn();
      n++;
    }
  }));
  return { n, seconds: (performance.now() - t0) / 1000 };
}

async function kvOps(url: string): Promise<number> {
  const t = await (await fetch(`${url}/metrics`)).text();
  let sum = 0;
  for (const line of t.split("\n")) {
    if (line.startsWith("wharf_kv_operation_duration_seconds_count")) {
      sum += Number(line.split(" ").pop());
    }
  }
  return sum;
}

/** tags of the measured pushes, distinct across sides and rounds */
let pushed = 0;
const servers: TestServer[] = [];
let dist: Distribution | null = null;
try {
  dist = await startDistribution();
  const startOff = () => startServer({ unchecked: true });
  const startOn = () =>
    startServer({
      unchecked: true,
      config: `[repository."bench".quota]\nmax_bytes = ${1024 ** 4}\n` +
        `[global.quota]\ndefault_max_bytes = ${1024 ** 4}\n`,
    });
  // The Wharf started later measured slower here even with identical configs (an A/A run:
  // −17%), so --quotas-first swaps the start order and --control adds a second quotas-off
  // server, started last, to show that bias beside the figures.
  const on1 = quotasFirst ? await startOn() : null;
  const off = await startOff();
  servers.push(off);
  const on = on1 ?? await startOn();
  servers.push(on);
  const ctl = control ? await startOff() : null;
  if (ctl) servers.push(ctl);
  const side = (name: string, url: string, metrics: boolean): Side => ({
    name,
    url,
    metrics,
    pushes: 0,
    pushSeconds: 0,
    pulls: 0,
    pullSeconds: 0,
    kvPerPush: 0,
  });
  const sides = [
    side("docker-registry", dist.url, false),
    side("wharf, quotas off", off.url, true),
    side(`wharf, quotas on${quotasFirst ? " (started first)" : ""}`, on.url, true),
    ...(ctl ? [side("wharf, quotas off (control, started last)", ctl.url, true)] : []),
  ];
  const images = new Map<Side, { digest: string; blobs: string[] }>();
  for (const s of sides) {
    for (let i = 0; i < 10; i++) images.set(s, await pushOnce(s.url, `warm${i}`));
    for (let i = 0; i < 10; i++) await pullOnce(s.url, images.get(s)!);
  }
  for (let r = 0; r < ROUNDS; r++) {
    // Rotated each round: a side's pushes leave background work (layer indexing) that the next
    // side pays for, so no side may always follow the same one.
    const order = sides.map((_, i) => sides[(i + r) % sides.length]);
    for (const s of order) {
      const before = s.metrics ? await kvOps(s.url) : 0;
      const p = await timed(async () => {
        await pushOnce(s.url, `t${pushed++}`);
      });
      if (s.metrics) s.kvPerPush += (await kvOps(s.url) - before) / p.n / ROUNDS;
      s.pushes += p.n;
      s.pushSeconds += p.seconds;
    }
    for (const s of order) {
      const p = await timed(() => pullOnce(s.url, images.get(s)!));
      s.pulls += p.n;
      s.pullSeconds += p.seconds;
    }
  }
  console.log(
    `quota bench: ${CONCURRENCY} concurrent clients, push = config + 256 KiB layer (POST+PUT each) ` +
      `+ manifest PUT, pull = manifest + 2 blob GETs; ${ROUNDS} rounds of ${ROUND_SECS} s per ` +
      `side, taking turns (busy shared 2-core machine)\n`,
  );
  console.log("| side | pushes/s | vs off | pulls/s | vs off | KV ops / push |");
  console.log("|---|---:|---:|---:|---:|---:|");
  const off0 = sides[1];
  const pct = (a: number, b: number) => `${(((a - b) / b) * 100).toFixed(1)}%`;
  for (const [i, s] of sides.entries()) {
    const push = s.pushes / s.pushSeconds;
    const pull = s.pulls / s.pullSeconds;
    console.log(
      `| ${s.name} | ${push.toFixed(1)} | ${
        i === 0 ? "–" : pct(push, off0.pushes / off0.pushSeconds)
      } | ${pull.toFixed(0)} | ${i === 0 ? "–" : pct(pull, off0.pulls / off0.pullSeconds)} | ${
        s.metrics ? s.kvPerPush.toFixed(1) : "–"
      } |`,
    );
  }
} finally {
  for (const s of servers) await s.stop().catch(() => {});
  for (const s of servers) await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
  await dist?.stop();
}
