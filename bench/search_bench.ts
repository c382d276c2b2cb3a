// Image reports (issue: image reports): registry-wide file search with ~1M indexed files, and the
// image diff of two ~1k-file images. Pushes LAYERS single-layer images (FILES files each) over 10
// namespaces through the real HTTP API, lets the index jobs list them and write the file index,
// then times searches by sha256, exact path and basename (one hit each, and a file shared by
// every layer, 10 hits a page), and GET /_svc/diff between two images of ~1k files.
// Reports p50/p95 per query kind (target p50 < 20 ms), indexing time and Wharf's peak RSS.
// Run: deno run -A --unstable-kv bench/search_bench.ts [--layers 100] [--files 10000]
import { createHash } from "node:crypto";
import { startServer, type TestServer } from "../tests/helpers/server.ts";
import { pushTarImage } from "../tests/helpers/tar_image.ts";
import { tarOf } from "../tests/helpers/tar.ts";

const arg = (name: string, dflt: number) => {
  const i = Deno.args.indexOf(name);
  return i >= 0 ? Number(Deno.args[i + 1]) : dflt;
};
const LAYERS = arg("--layers", 100);
const FILES = arg("--files", 10_000);
const SAMPLES = 200;
const SHARED = "shared=true\n";

const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const fileData = (l: number, f: number) => `layer ${l} file ${f}\n`;
const filePath = (l: number, f: number) => `usr/share/l${l}/d${f % 100}/f${f}.txt`;

function vmHwmMiB(pid: number): number {
  const s = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmHWM:\s+(\d+)/.exec(s)![1]) / 1024;
}

const pushImage = (s: TestServer, ns: string, tag: string, tars: Uint8Array[]) =>
  pushTarImage(s.url, ns, tag, tars, { ns, tag });

function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
}

async function timed(s: TestServer, paths: string[], expect: (b: unknown) => boolean) {
  const ms: number[] = [];
  for (const p of paths) {
    const t = performance.now();
    const r = await fetch(`${s.url}${p}`);
    const body = await r.json();
    ms.push(performance.now() - t);
    if (r.status !== 200 || !expect(body)) {
      throw new Error(`${p}: ${r.status} ${JSON.stringify(body).slice(0, 300)}`);
    }
  }
  return { p50: pct(ms, 0.5), p95: pct(ms, 0.95) };
}

const rnd = (n: number) => Math.floor(Math.random() * n);

async function main() {
  const s = await startServer({
    unchecked: true,
    config: "[global.job_queue]\npoll_interval_ms = 50\n[scan]\non_push = false\n",
  });
  try {
    const t0 = performance.now();
    for (let l = 0; l < LAYERS; l++) {
      const items = [{ path: "etc/shared.conf", data: SHARED }];
      for (let f = 0; f < FILES; f++) items.push({ path: filePath(l, f), data: fileData(l, f) });
      await pushImage(s, `bench/ns${l % 10}`, `v${l}`, [tarOf(items)]);
    }
    const pushed = (performance.now() - t0) / 1000;
    // Indexed when the last file of every layer is searchable (the file index is written in
    // listing order).
    for (let l = 0; l < LAYERS; l++) {
      for (;;) {
        const r = await fetch(`${s.url}/v2/_svc/files/search?path=${filePath(l, FILES - 1)}`);
        if ((await r.json()).results.length === 1) break;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    const indexed = (performance.now() - t0) / 1000;
    const total = LAYERS * (FILES + 1);
    const picks = Array.from({ length: SAMPLES }, () => [rnd(LAYERS), rnd(FILES)]);
    const one = (b: unknown) => (b as { results: unknown[] }).results.length === 1;
    const bySha = await timed(
      s,
      picks.map(([l, f]) => `/v2/_svc/files/search?sha256=${sha(fileData(l, f))}`),
      one,
    );
    const byPath = await timed(
      s,
      picks.map(([l, f]) => `/v2/_svc/files/search?path=${filePath(l, f)}`),
      one,
    );
    const byName = await timed(
      s,
      picks.map(([, f]) => `/v2/_svc/files/search?name=f${f}.txt&n=10`),
      (b) => (b as { results: unknown[] }).results.length === Math.min(10, LAYERS),
    );
    const shared = await timed(
      s,
      picks.map(() => `/v2/_svc/files/search?sha256=${sha(SHARED)}&n=10`),
      (b) => (b as { results: unknown[] }).results.length === Math.min(10, LAYERS),
    );
    const miss = await timed(
      s,
      picks.map((_, i) => `/v2/_svc/files/search?sha256=${sha(`absent ${i}`)}`),
      (b) => (b as { results: unknown[] }).results.length === 0,
    );

    // Diff: two images of ~1k files, the second with 100 changed, 50 removed, 50 added.
    const base = Array.from({ length: 1000 }, (_, f) => ({
      path: `app/d${f % 20}/f${f}`,
      data: `v1 ${f}\n`,
    }));
    const next = base.filter((_, f) => f % 20 !== 7).map((it, f) =>
      f % 10 === 3 ? { ...it, data: `v2 ${f} changed\n` } : it
    );
    for (let f = 0; f < 50; f++) next.push({ path: `app/new/f${f}`, data: `new ${f}\n` });
    await pushImage(s, "bench/diff", "a", [tarOf(base)]);
    await pushImage(s, "bench/diff", "b", [tarOf(next)]);
    let diffFirst = 0;
    const td = performance.now();
    for (;;) {
      const r = await fetch(`${s.url}/v2/bench/diff/_svc/diff?from=a&to=b`);
      await r.body?.cancel();
      if (r.status === 200) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    diffFirst = performance.now() - td;
    const diff = await timed(
      s,
      Array.from({ length: 50 }, () => "/v2/bench/diff/_svc/diff?from=a&to=b"),
      (b) => {
        const d = b as { added: unknown[]; removed: unknown[]; modified: unknown[] };
        return d.added.length === 50 && d.removed.length === 50 && d.modified.length > 0;
      },
    );
    const f = (x: number) => x.toFixed(1);
    console.log(`search bench: ${LAYERS} layers × ${FILES} files = ${total} indexed files`);
    console.log(
      `  push ${pushed.toFixed(1)} s, indexed (listings + file index) after ${
        indexed.toFixed(1)
      } s (${Math.round(total / indexed)} files/s)`,
    );
    for (
      const [k, v] of Object.entries({
        "sha256 (1 hit)": bySha,
        "path (1 hit)": byPath,
        "name (10 hits)": byName,
        "shared sha256 (10 of N)": shared,
        "absent sha256": miss,
        "diff 1k vs 1k files": diff,
      })
    ) console.log(`  ${k.padEnd(24)} p50 ${f(v.p50)} ms  p95 ${f(v.p95)} ms`);
    console.log(`  diff first answer (layers indexed) after ${f(diffFirst)} ms`);
    console.log(`  wharf peak RSS ${vmHwmMiB(s.pid).toFixed(0)} MiB`);
  } finally {
    await s.stop();
  }
}

await main();
