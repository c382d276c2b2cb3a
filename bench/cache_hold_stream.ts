// The cache cap's hold on the blob path (issue 26 part 2): a blob GET of a capped pull-through
// repository is served through a stream that renews its images' stamps while it lasts. This
// times GETs of one cached 128 MiB layer from a capped and an uncapped repository of one
// server, alternating, one at a time and 8 at once, so the wrapper's cost shows (or does not)
// beside the noise. The wrapper is a JS stream: the fs store's native file pipe (what concurrent
// pulls get, lib/storage/fs_read.ts) is lost under it.
//
// Run: deno run -A --unstable-kv bench/cache_hold_stream.ts
import { FakeRegistry, generatedBlob } from "../tests/helpers/fake_registry.ts";
import { startServer } from "../tests/helpers/server.ts";
import { sleep } from "../tests/api/_cache_images.ts";

const SIZE = 128 << 20;
const ROUNDS = 8;

const up = await FakeRegistry.start();
const layer = generatedBlob(SIZE);
for (const name of ["library/capped", "library/open"]) up.addBlob(name, layer.source, layer.digest);
const s = await startServer({
  config: `
[repository."hub"]
max_cache_bytes = ${4 * SIZE}
[[repository."hub".upstream]]
url = "${up.url}"

[repository."open"]
[[repository."open".upstream]]
url = "${up.url}"
`,
  unchecked: true,
});
try {
  const paths = {
    capped: `/v2/hub/library/capped/blobs/${layer.digest}`,
    uncapped: `/v2/open/library/open/blobs/${layer.digest}`,
  };
  const get = async (path: string) => {
    const t0 = performance.now();
    const r = await fetch(s.url + path);
    let n = 0;
    for await (const c of r.body!) n += c.byteLength;
    if (n !== SIZE) throw new Error(`${path}: ${n} bytes`);
    return (performance.now() - t0) / 1000;
  };
  for (const p of Object.values(paths)) await get(p); // fills
  await sleep(1000);
  const secs: Record<string, number[]> = { capped: [], uncapped: [] };
  const secs8: Record<string, number[]> = { capped: [], uncapped: [] };
  for (let i = 0; i < ROUNDS; i++) {
    const order = i % 2 ? ["capped", "uncapped"] as const : ["uncapped", "capped"] as const;
    for (const k of order) secs[k].push(await get(paths[k]));
    for (const k of order) {
      const t0 = performance.now();
      await Promise.all(Array.from({ length: 8 }, () => get(paths[k])));
      secs8[k].push((performance.now() - t0) / 1000 / 8);
    }
  }
  const median = (a: number[]) => a.sort((x, y) => x - y)[a.length >> 1];
  const mibs = (t: Record<string, number[]>, k: string) => (SIZE / (1 << 20)) / median(t[k]);
  const cost = (t: Record<string, number[]>) =>
    ((mibs(t, "capped") / mibs(t, "uncapped") - 1) * 100).toFixed(1);
  console.log(`| repository | MiB/s, one GET | MiB/s summed, 8 GETs at once |`);
  console.log("|---|---|---|");
  for (const k of ["uncapped", "capped"]) {
    console.log(`| ${k} | ${mibs(secs, k).toFixed(0)} | ${mibs(secs8, k).toFixed(0)} |`);
  }
  console.log(`capped vs uncapped: ${cost(secs)}% one at a time, ${cost(secs8)}% 8 at once`);
} finally {
  await s.stop();
  await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
  await up.close();
}
