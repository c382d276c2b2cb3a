// Where a push's server CPU goes with quotas and the audit trail on against off: a V8 CPU profile
// of the serving process (started with WHARF_SERVER_INSPECT) while CONCURRENCY clients push
// one-layer images (bench/image_traffic.ts), the sides profiled in the order off, on, on, off so
// a drift in the machine's load falls on both alike. Printed per side: pushes, busy time per
// push and the self time per push in the quota and audit code's files; then, over both sides of
// each kind, the self time per push of those files' functions and of the functions that differ
// most between the sides. Self time, not inclusive: the audit context and the quota ledger's
// `admit` wrap whole requests and commits, so their inclusive time is the push's. A V8 profile
// sees only the JavaScript thread: the process's CPU per push is also split by thread from
// /proc (the JS thread against the rest: KV's SQLite and file system work run on other threads).
//
// Run: WHARF_SERVER_INSPECT=127.0.0.1:9339 deno run -A --unstable-kv bench/push_profile.ts \
//        [--secs N]
import { pushOnce } from "./image_traffic.ts";
import { openInspector, type Profile, type ProfileNode } from "./inspector.ts";
import { startServer } from "../tests/helpers/server.ts";

const secsArg = Deno.args.indexOf("--secs");
const SECS = secsArg >= 0 ? Number(Deno.args[secsArg + 1]) : 6;
const CONCURRENCY = 8;
const inspect = Deno.env.get("WHARF_SERVER_INSPECT");
if (!inspect) throw new Error("set WHARF_SERVER_INSPECT=127.0.0.1:<port>");

const ON = `
[repository."bench".quota]
max_bytes = ${1024 ** 4}
[global.quota]
default_max_bytes = ${1024 ** 4}
[global.audit]
enabled = true
`;

/** The quota and audit code, by the file its frames come from. */
const PARTS: [string, RegExp][] = [
  ["lib/audit/*", /lib\/audit\//],
  ["lib/metadata/usage.ts", /lib\/metadata\/usage\.ts/],
  ["lib/quota/*", /lib\/quota\//],
  ["lib/events/emitter.ts", /lib\/events\/emitter\.ts/],
  ["routes/audit.ts", /routes\/audit\.ts/],
  ["AsyncLocalStorage", /async_hooks/],
];

interface Result {
  pushes: number;
  busyUs: number;
  /** server CPU µs per push over the profiled window: the JS thread, the other threads */
  cpuMain: number;
  cpuOther: number;
  self: Map<string, number>;
  parts: Map<string, number>;
}

function frame(x: ProfileNode): string {
  return `${x.callFrame.functionName || "(anon)"} ${
    x.callFrame.url.replace(/.*\/work\/main\//, "")
  }:${x.callFrame.lineNumber}`;
}

/** User + system CPU µs per thread of a process so far (Linux /proc), the main thread first. */
function threadCpu(pid: number): { main: number; other: number } {
  let main = 0, other = 0;
  for (const t of Deno.readDirSync(`/proc/${pid}/task`)) {
    let f: string[];
    try {
      f = Deno.readTextFileSync(`/proc/${pid}/task/${t.name}/stat`).split(") ")[1].split(" ");
    } catch {
      continue; // the thread ended
    }
    const us = (Number(f[11]) + Number(f[12])) * 10_000;
    if (Number(t.name) === pid) main += us;
    else other += us;
  }
  return { main, other };
}

function digest(
  profile: Profile,
  pushes: number,
  cpu: { main: number; other: number },
): Result {
  const byId = new Map<number, ProfileNode>(profile.nodes.map((x) => [x.id, x]));
  const self = new Map<string, number>();
  const parts = new Map<string, number>();
  let busyUs = 0;
  profile.samples.forEach((nid, i) => {
    const dt = profile.timeDeltas[i] ?? 0;
    const x = byId.get(nid)!;
    const f = x.callFrame.functionName;
    if (f === "(idle)" || f === "(program)") return;
    busyUs += dt;
    self.set(frame(x), (self.get(frame(x)) ?? 0) + dt);
    for (const [name, re] of PARTS) {
      if (re.test(x.callFrame.url)) parts.set(name, (parts.get(name) ?? 0) + dt);
    }
  });
  return {
    pushes,
    busyUs,
    cpuMain: cpu.main / pushes,
    cpuOther: cpu.other / pushes,
    self,
    parts,
  };
}

async function profileSide(config: string): Promise<Result> {
  const s = await startServer({ unchecked: true, config });
  try {
    let n = 0;
    const drive = async (secs: number) => {
      const until = performance.now() + secs * 1000;
      await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
        while (performance.now() < until) {
          await pushOnce(s.url, `p${n++}`);
        }
      }));
    };
    await drive(2);
    const inspector = await openInspector(inspect);
    await inspector.startProfile(200);
    const n0 = n;
    const c0 = threadCpu(s.pid);
    await drive(SECS);
    const c1 = threadCpu(s.pid);
    const profile = await inspector.stopProfile();
    inspector.close();
    return digest(profile, n - n0, { main: c1.main - c0.main, other: c1.other - c0.other });
  } finally {
    await s.stop().catch(() => {});
    await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
  }
}

const load0 = Deno.loadavg()[0];
const runs: { on: boolean; r: Result }[] = [];
for (const on of [false, true, true, false]) runs.push({ on, r: await profileSide(on ? ON : "") });
console.log(
  `push profile, ${SECS} s per side, ${CONCURRENCY} clients, load average ${load0.toFixed(1)} → ${
    Deno.loadavg()[0].toFixed(1)
  }\n`,
);
for (const { on, r } of runs) {
  const parts = PARTS.map(([name]) => `${name} ${((r.parts.get(name) ?? 0) / r.pushes).toFixed(0)}`)
    .join(", ");
  console.log(
    `${on ? "on " : "off"}: ${r.pushes} pushes, CPU µs/push ${
      (r.cpuMain + r.cpuOther).toFixed(0)
    } (JS thread ${r.cpuMain.toFixed(0)}, other threads ${r.cpuOther.toFixed(0)}), profiled busy ${
      (r.busyUs / r.pushes).toFixed(0)
    } µs/push; self µs/push: ${parts}`,
  );
}
const sum = (on: boolean) => {
  const self = new Map<string, number>();
  let pushes = 0;
  for (const x of runs.filter((x) => x.on === on)) {
    pushes += x.r.pushes;
    for (const [k, v] of x.r.self) self.set(k, (self.get(k) ?? 0) + v);
  }
  return { self, pushes };
};
const [a, b] = [sum(false), sum(true)];
const keys = new Set([...a.self.keys(), ...b.self.keys()]);
const rows = [...keys].map((k) => {
  const off = (a.self.get(k) ?? 0) / a.pushes;
  const on = (b.self.get(k) ?? 0) / b.pushes;
  return { k, off, on, d: on - off };
});
const show = (title: string, list: typeof rows) => {
  console.log(`\n${title}`);
  for (const x of list) {
    console.log(
      `${x.d.toFixed(1).padStart(7)}  (${x.off.toFixed(1)} → ${x.on.toFixed(1)})  ${x.k}`,
    );
  }
};
show(
  "self µs/push of the quota and audit code's functions, on − off (off → on):",
  rows.filter((x) => PARTS.some(([, re]) => re.test(x.k)) && x.on + x.off >= 0.5)
    .sort((x, y) => y.on - x.on),
);
show(
  "self µs/push, largest differences, on − off (off → on):",
  rows.sort((x, y) => Math.abs(y.d) - Math.abs(x.d)).slice(0, 25),
);
