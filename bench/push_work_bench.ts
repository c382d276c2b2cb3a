// Issue 25: the fixed cost of pushing small blobs, where per-blob work (KV operations, syncs)
// outweighs the bytes. Pushes N blobs of 200 KiB with CONCURRENCY clients in Docker's flow
// (POST, then PUT ?digest= with the body) and reports blobs/s and the server's CPU per blob.
// CPU per blob moves less than blobs/s when other processes share the machine; report the load.
//
// Run: deno run -A --unstable-kv bench/push_work_bench.ts [--blobs N]
import { startServer } from "../tests/helpers/server.ts";
import { upload } from "./image_traffic.ts";

const NS = "bench/small";

const arg = Deno.args.indexOf("--blobs");
const N = arg >= 0 ? Number(Deno.args[arg + 1]) : 400;
const CONCURRENCY = 4;
const SIZE = 200 << 10;

/** CPU time (user + system) a process has used, in ms, from /proc (clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const f = Deno.readTextFileSync(`/proc/${pid}/stat`).split(") ")[1].split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
}

const blobs = Array.from({ length: N }, (_, k) => {
  const b = new Uint8Array(SIZE).map((_, i) => (i * 31 + k * 7) & 0xff);
  new DataView(b.buffer).setUint32(0, k); // distinct digests
  return b;
});
const s = await startServer({ unchecked: true });
try {
  await upload(s.url, NS, new Uint8Array([1, 2, 3])); // warm the namespace and the process
  const cpu0 = cpuMs(s.pid);
  const t0 = performance.now();
  let next = 0;
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    for (let i = next++; i < N; i = next++) await upload(s.url, NS, blobs[i]);
  }));
  const secs = (performance.now() - t0) / 1000;
  const cpu = cpuMs(s.pid) - cpu0;
  const load = Deno.readTextFileSync("/proc/loadavg").split(" ").slice(0, 3).join(" ");
  console.log(
    `${N} × 200 KiB (POST + PUT), ${CONCURRENCY} clients: ${(N / secs).toFixed(0)} blobs/s, ` +
      `server CPU ${(cpu / N).toFixed(2)} ms/blob (load ${load})`,
  );
} finally {
  await s.stop();
  await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
}
