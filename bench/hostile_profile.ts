// Where the serving thread spends its time during one hostile case: a CPU profile taken through
// the V8 inspector (the server started with WHARF_SERVER_INSPECT), printed as self time per
// function and the longest busy stretch (what a client waits behind).
// Run: WHARF_SERVER_INSPECT=127.0.0.1:9339 deno run -A --unstable-kv bench/hostile_profile.ts [case]
import { openInspector, type ProfileNode } from "./inspector.ts";
import { startServer } from "../tests/helpers/server.ts";
import { entriesPath, pushCase, settle, watchServer } from "../tests/helpers/hostile.ts";
const CASE = Deno.args[0] ?? "million_files";
const s = await startServer({
  unchecked: true,
  config: `[global.job_queue]\npoll_interval_ms = 100\n`,
});
try {
  const base = await pushCase(s, "names");
  const inspector = await openInspector();
  await inspector.startProfile(1000);
  const w = watchServer(s, base.ns, true);
  const c = await pushCase(s, CASE);
  const e = await settle(s, entriesPath(c), 600_000);
  await e.body?.cancel();
  await new Promise((r) => setTimeout(r, 25000));
  const profile = await inspector.stopProfile();
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
  inspector.close();
} finally {
  await s.stop();
  await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
}
