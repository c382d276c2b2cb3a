// Where the serving thread spends its time during one hostile case: a CPU profile taken through
// the V8 inspector (the server started with WHARF_SERVER_INSPECT), printed as self time per
// function and the longest busy stretch (what a client waits behind).
// Run: WHARF_SERVER_INSPECT=127.0.0.1:9339 deno run -A --unstable-kv bench/hostile_profile.ts [case]
/** The parts of a V8 CPU profile read here. */
interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

import { startServer } from "../tests/helpers/server.ts";
import { entriesPath, pushCase, settle, watchServer } from "../tests/helpers/hostile.ts";
const CASE = Deno.args[0] ?? "million_files";
const s = await startServer({
  productionFlags: true,
  unchecked: true,
  config: `[global.job_queue]\npoll_interval_ms = 100\n`,
});
try {
  const base = await pushCase(s, "names");
  const list = await (await fetch(
    `http://${Deno.env.get("WHARF_SERVER_INSPECT") ?? "127.0.0.1:9339"}/json/list`,
  )).json();
  const ws = new WebSocket(list[0].webSocketDebuggerUrl);
  await new Promise((r) => ws.onopen = r);
  let id = 0;
  const pending = new Map<number, (v: unknown) => void>();
  ws.onmessage = (m) => {
    const d = JSON.parse(m.data);
    if (d.id && pending.has(d.id)) {
      pending.get(d.id)!(d.result);
      pending.delete(d.id);
    }
  };
  const call = (method: string, params = {}) =>
    new Promise<{ profile: Profile } & Record<string, unknown>>((r) => {
      const i = ++id;
      pending.set(i, r as (v: unknown) => void);
      ws.send(JSON.stringify({ id: i, method, params }));
    });
  await call("Profiler.enable");
  await call("Profiler.setSamplingInterval", { interval: 1000 });
  await call("Profiler.start");
  const w = watchServer(s, base.ns, true);
  const c = await pushCase(s, CASE);
  const e = await settle(s, entriesPath(c), 600_000);
  await e.body?.cancel();
  await new Promise((r) => setTimeout(r, 25000));
  const { profile } = await call("Profiler.stop");
  const r = await w.end();
  console.log("slowest", r.slowest);
  // self time per function
  const byId = new Map<number, ProfileNode>(profile.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  const dt = profile.timeDeltas as number[];
  profile.samples.forEach((nid: number, i: number) => {
    const n = byId.get(nid)!;
    const f = n.callFrame;
    const k = `${f.functionName || "(anon)"} ${
      f.url.replace(/.*\/work\/main\//, "")
    }:${f.lineNumber}`;
    self.set(k, (self.get(k) ?? 0) + (dt[i] ?? 0));
  });
  const top = [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, 40);
  for (const [k, us] of top) console.log((us / 1000).toFixed(0).padStart(7), "ms", k);
  // longest contiguous non-idle stretches
  let run = 0, worst = 0;
  profile.samples.forEach((nid: number, i: number) => {
    const n = byId.get(nid)!;
    const idle = n.callFrame.functionName === "(idle)" || n.callFrame.functionName === "(program)";
    if (idle) {
      worst = Math.max(worst, run);
      run = 0;
    } else run += dt[i] ?? 0;
  });
  console.log("longest busy stretch", (worst / 1000).toFixed(0), "ms");
  ws.close();
} finally {
  await s.stop();
  await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
}
