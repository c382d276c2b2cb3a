// File search by basename pattern (docs/api.md#file-search): one image of 20,000 files in one
// layer, then 100 sequential searches per kind: an exact name, a prefix pattern (`file-1*`, 100
// hits a page), a suffix pattern (`*.sh`, 1,000 names end so), and a pattern that matches
// nothing in a range of 20,000 names (each page stops at the 5,000-key bound).
// Run: deno run -A --unstable-kv bench/pattern_search_bench.ts
import { withServer } from "../tests/helpers/server.ts";
import { pushTarImage } from "../tests/helpers/tar_image.ts";
import { tarHeader } from "../tests/helpers/tar.ts";

const FILES = 20_000;
function layer(): Uint8Array {
  const out = new Uint8Array((FILES + 1) * 512 + 1024);
  let at = 0;
  out.set(tarHeader("d/", 0, "5", 0o755), at);
  at += 512;
  for (let i = 0; i < FILES; i++) {
    const name = i % 20 === 0 ? `d/script-${i}.sh` : `d/file-${i}.txt`;
    out.set(tarHeader(name, 0), at);
    at += 512;
  }
  return out.subarray(0, at + 1024);
}

const pct = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor(xs.length * p))];

await withServer({ config: "[global.job_queue]\npoll_interval_ms = 100\n" }, async (s) => {
  const t0 = performance.now();
  await pushTarImage(s.url, "pat/bench", "v1", [layer()]);
  for (;;) {
    const r = await fetch(`${s.url}/v2/_svc/files/search?name=file-19999.txt`);
    if ((await r.json()).results.length === 1) break;
    await new Promise((res) => setTimeout(res, 200));
  }
  console.log(
    `${FILES} files pushed, listed and file-indexed in ${(performance.now() - t0).toFixed(0)} ms`,
  );
  for (
    const [label, q] of [
      ["exact name, 1 hit", "name=file-7.txt"],
      ["prefix file-1*, a page of 100", "name=file-1*"],
      ["suffix *.sh, a page of 100", "name=*.sh"],
      ["no match in 20,000 names, first page", "name=file-*.none"],
    ]
  ) {
    const ms: number[] = [];
    let hits = 0;
    for (let i = 0; i < 100; i++) {
      const t = performance.now();
      const b = await (await fetch(`${s.url}/v2/_svc/files/search?${q}`)).json();
      ms.push(performance.now() - t);
      hits = b.results.length;
    }
    ms.sort((a, b) => a - b);
    console.log(
      `${label}: p50 ${pct(ms, 0.5).toFixed(1)} ms, p95 ${
        pct(ms, 0.95).toFixed(1)
      } ms (${hits} hits)`,
    );
  }
});
