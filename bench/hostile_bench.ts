// Hostile content (issue 22): each case of tests/fixtures/hostile_layers.py pushed as an ordinary
// image to a Wharf run as deployed (`deno task start`'s V8 flags), one after another, while a
// client polls /healthz and tags/list of an image pushed before. Per case: time from the push
// to a final answer (entries and, for images with package databases, the report), the serving
// process's peak RSS, the sandbox's peak RSS and CPU seconds (its processes are the server's
// children), the slowest /healthz or tags/list answer and the event-loop lag metric's max.
// Targets: no stall over 1 s, serving RSS growth under 50 MiB, every case within its budget.
// Run: deno run -A --unstable-kv bench/hostile_bench.ts [case ...]   (loopback only)
import { req } from "../tests/helpers/api.ts";
import { processUsage } from "../lib/sandbox/mod.ts";
import { startServer, type TestServer } from "../tests/helpers/server.ts";
import {
  entriesPath,
  HOSTILE_CASES,
  pushCase,
  reportPath,
  rssOf,
  settle,
  watchServer,
} from "../tests/helpers/hostile.ts";

const CASES = Deno.args.length > 0 ? Deno.args : ["names", ...HOSTILE_CASES, "million_files"];
/** Cases whose file details are asked for (parsed in a sandbox or under the reader's caps). */
const DETAILS: Record<string, string> = {
  cert_bundle: "etc/ssl/certs/bundle.pem",
  costly_elf: "usr/bin/costly",
};
const WITH_REPORT = new Set([
  "symlink_chain",
  "link_loop",
  "dpkg_newlines",
  "dpkg_many",
  "os_release_huge",
  "rpm_view",
  "garbage_dbs",
]);

/** The server's child processes (sandboxes) and their peak RSS and last CPU seconds. */
function watchChildren(pid: number) {
  const seen = new Map<number, { rss: number; cpu: number }>();
  let stop = false;
  const done = (async () => {
    while (!stop) {
      try {
        for await (const t of Deno.readDir(`/proc/${pid}/task`)) {
          const kids = (await Deno.readTextFile(`/proc/${pid}/task/${t.name}/children`)).trim();
          for (const k of kids ? kids.split(" ").map(Number) : []) {
            const u = await processUsage(k);
            if (!u) continue;
            const prev = seen.get(k) ?? { rss: 0, cpu: 0 };
            seen.set(k, {
              rss: Math.max(prev.rss, u.rssBytes),
              cpu: Math.max(prev.cpu, u.cpuSecs),
            });
          }
        }
      } catch { /* a task ended meanwhile */ }
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  return {
    take() {
      let rss = 0;
      let cpu = 0;
      for (const v of seen.values()) {
        rss = Math.max(rss, v.rss);
        cpu += v.cpu;
      }
      seen.clear();
      return { rss, cpu, count: 0 };
    },
    async end() {
      stop = true;
      await done;
    },
  };
}

async function lagMax(s: TestServer): Promise<number> {
  const text = await (await req(s, "/metrics")).text();
  return Number(/wharf_event_loop_lag_seconds\{quantile="1"\} (\S+)/.exec(text)?.[1] ?? NaN);
}

const MiB = 1024 * 1024;
const s = await startServer({
  unchecked: true,
  config: `[global.job_queue]\npoll_interval_ms = 100\n`,
});
try {
  const base = await pushCase(s, "names");
  await settle(s, entriesPath(base));
  await new Promise((r) => setTimeout(r, 1000));
  const idle = await rssOf(s.pid);
  const w = watchServer(s, base.ns, Deno.env.get("BENCH_TRACE") !== undefined);
  const kids = watchChildren(s.pid);
  console.log(`idle serving RSS ${(idle / MiB).toFixed(0)} MiB`);
  console.log(
    "| case | pushed | final answer | time | serving peak RSS | sandbox peak RSS | sandbox CPU | slowest answer | lag max |",
  );
  console.log("|---|---|---|---|---|---|---|---|---|");
  for (const k of CASES) {
    w.take();
    kids.take();
    const t = performance.now();
    const c = await pushCase(s, k);
    if (Deno.env.get("BENCH_TRACE")) console.log("pushed", new Date().toISOString());
    const e = await settle(s, entriesPath(c));
    if (Deno.env.get("BENCH_TRACE")) console.log("entries final", new Date().toISOString());
    let answer = `${e.status}`;
    // A listing of a million entries parsed here would stall this process, and with it the
    // watcher's own timing: only error bodies are read.
    const body = e.status === 200 ? (await e.body?.cancel(), "") : await e.text();
    if (e.status !== 200) answer += ` ${JSON.parse(body).errors?.[0]?.code ?? ""}`;
    const budget = /budget (\w+)/.exec(body)?.[1];
    if (budget) answer += ` (${budget})`;
    const detailsOf = DETAILS[k];
    if (detailsOf && e.status === 200) {
      const d = await req(s, `/v2/${c.ns}/_svc/layers/${c.layer}/details?path=${detailsOf}`);
      answer += `; details ${d.status}`;
      await d.body?.cancel();
    }
    if (WITH_REPORT.has(k)) {
      const r = await settle(s, reportPath(c));
      const rep = await r.json();
      answer += `; report ${r.status}, ${rep.packages?.length ?? 0} pkgs`;
    }
    const ms = performance.now() - t;
    await new Promise((r) => setTimeout(r, 300));
    const sv = w.take();
    const kid = kids.take();
    console.log(
      `| ${k} | ${(c.size / 1024).toFixed(0)} KiB | ${answer} | ${(ms / 1000).toFixed(1)} s | ${
        (sv.peakRss / MiB).toFixed(0)
      } MiB | ${(kid.rss / MiB).toFixed(0)} MiB | ${kid.cpu.toFixed(1)} s | ${
        sv.slowest.toFixed(0)
      } ms | ${((await lagMax(s)) * 1000).toFixed(0)} ms |`,
    );
  }
  const end = await w.end();
  await kids.end();
  console.log(
    `serving RSS: idle ${(idle / MiB).toFixed(0)} MiB, peak ${
      (end.peakRss / MiB).toFixed(0)
    } MiB; non-200 polls: ${end.bad.length}`,
  );
} finally {
  await s.stop();
  await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
}
