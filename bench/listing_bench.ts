// The entries endpoint for a 100k-entry layer (issue: web UI, a 100k-entry tree in < 1 s): how
// long the listing takes to arrive plain and gzipped, from fetch and from curl. The listing is
// stored gzipped by the indexer (lib/index/listing_document.ts) and sent as stored.
// Run: deno run -A --unstable-kv bench/listing_bench.ts   (loopback only)
import { withServer } from "../tests/helpers/server.ts";
import { pushTarImage } from "../tests/helpers/tar_image.ts";
import { tarHeader } from "../tests/helpers/tar.ts";
function manyFiles(n: number): Uint8Array {
  const dirs = 100, per = Math.ceil(n / dirs);
  const out = new Uint8Array((n + dirs) * 512 + 1024);
  let at = 0;
  for (let d = 0; d < dirs; d++) {
    out.set(tarHeader(`data/d${String(d).padStart(3, "0")}/`, 0, "5", 0o755), at);
    at += 512;
    for (let f = 0; f < per && d * per + f < n; f++) {
      out.set(tarHeader(`data/d${String(d).padStart(3, "0")}/file-${f}.txt`, 0), at);
      at += 512;
    }
  }
  return out.subarray(0, at + 1024);
}
await withServer({ config: "[global.job_queue]\npoll_interval_ms = 100\n" }, async (s) => {
  const img = await pushTarImage(s.url, "big/img", "v1", [manyFiles(100_000)]);
  const u = `${s.url}/v2/big/img/_svc/layers/${img.layers[0]}/entries`;
  for (;;) {
    const r = await fetch(u, { method: "HEAD" });
    await r.body?.cancel();
    if (r.status === 200) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  for (const enc of ["identity", "gzip", "identity", "gzip"]) {
    const t = performance.now();
    const r = await fetch(u, { headers: { "accept-encoding": enc } });
    let n = 0;
    const rd = r.body!.getReader();
    const t1 = performance.now();
    for (;;) {
      const { done, value } = await rd.read();
      if (done) break;
      n += value.length;
    }
    console.log(
      enc,
      "headers",
      Math.round(t1 - t),
      "ms; body",
      n,
      "B in",
      Math.round(performance.now() - t),
      "ms",
    );
  }
  const p = new Deno.Command("curl", {
    args: ["-s", "-o", "/dev/null", "-w", "%{time_total} %{size_download}\n", "--compressed", u],
  }).outputSync();
  console.log("curl --compressed", new TextDecoder().decode(p.stdout));
  const p2 = new Deno.Command("curl", {
    args: ["-s", "-o", "/dev/null", "-w", "%{time_total} %{size_download}\n", u],
  }).outputSync();
  console.log("curl plain", new TextDecoder().decode(p2.stdout));
});
