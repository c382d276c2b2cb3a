// Scrub throughput on a registry of N blobs (default 10,000) spread over 100 namespaces, half
// of them deleted (so half the sweep reclaims). Run: deno run -A --unstable-kv
// bench/scrub_bench.ts [N]. Prints a dry run and a real run, in keys (and objects) per second.
import { createHash } from "node:crypto";
import { join } from "node:path";
import { defaultConfig } from "../lib/config/mod.ts";
import { FsBlobStore } from "../lib/storage/mod.ts";
import { openMetadata } from "../lib/kv/mod.ts";
import { formatSummary, Registry, Scrubber } from "../lib/registry/mod.ts";
import { allWriteEffects } from "../lib/services/mod.ts";

const N = Number(Deno.args[0] ?? 10_000);
const dir = await Deno.makeTempDir({ prefix: "wharf-scrub-bench-" });
const cfg = defaultConfig();
cfg.blobStore.fs.rootDir = join(dir, "blobs");
const store = new FsBlobStore(cfg.blobStore.fs.rootDir);
await store.init();
const kv = await openMetadata(join(dir, "kv.sqlite"));
const reg = new Registry(cfg, kv, store, { effects: allWriteEffects(cfg) });

const t0 = performance.now();
const pushed: [string, string][] = [];
const CONCURRENCY = 16;
let next = 0;
await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
  while (next < N) {
    const i = next++;
    const bytes = new TextEncoder().encode(`blob ${i} ${"x".repeat(i % 512)}`);
    const digest = `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
    const ns = `bench/ns${i % 100}`;
    await reg.uploads.start(ns, {
      digest,
      digestAlgorithm: null,
      mount: null,
      from: null,
      canRead: () => true,
      body: new Blob([bytes]).stream(),
      contentLength: bytes.byteLength,
    });
    pushed.push([ns, digest]);
  }
}));
for (const [ns, d] of pushed.filter((_, i) => i % 2 === 0)) await reg.blobs.delete(ns, d);
console.log(
  `setup: ${N} blobs pushed, ${Math.ceil(N / 2)} deleted in ${
    ((performance.now() - t0) / 1000).toFixed(1)
  }s`,
);

const scrubber = new Scrubber(cfg, kv, store);
console.log(formatSummary((await scrubber.run({ dryRun: true, graceSecs: 0 }))!));
console.log(formatSummary((await scrubber.run({ graceSecs: 0 }))!));
console.log(formatSummary((await scrubber.run({ graceSecs: 0 }))!));
kv.close();
await Deno.remove(dir, { recursive: true });
