// Joins the two workload result files into one JSON and a Markdown table (printed and saved).
// Ratio column: Wharf relative to docker-registry, oriented so that > 1 always means Wharf is
// better (throughputs: wharf/distribution; latencies and memory: distribution/wharf).
//
// Usage: deno run -A bench/report.ts <distribution.json> <wharf.json> <out-dir>
import { join } from "node:path";

const [distFile, wharfFile, outDir] = Deno.args;
if (!distFile || !wharfFile || !outDir) {
  console.error("usage: report.ts <distribution.json> <wharf.json> <out-dir>");
  Deno.exit(2);
}

// deno-lint-ignore no-explicit-any
type Result = Record<string, any>;
async function load(file: string): Promise<Result | null> {
  try {
    return JSON.parse(await Deno.readTextFile(file));
  } catch {
    return null;
  }
}
const dist = await load(distFile);
const wharf = await load(wharfFile);

interface Row {
  name: string;
  unit: string;
  higherIsBetter: boolean;
  get: (r: Result) => number | undefined;
}

const p = dist?.params ?? wharf?.params ?? {};
const mib = (n: number) => `${n / (1 << 20)} MiB`;
const rows: Row[] = [
  {
    name: `monolithic push, ${p.monoCount}×${mib(p.monoSize)}, ${p.concurrency} concurrent`,
    unit: "MB/s",
    higherIsBetter: true,
    get: (r) => r.monoPush?.mbps,
  },
  {
    name: `chunked push, ${mib(p.chunkedSize)} in ${mib(p.chunkSize)} PATCHes`,
    unit: "MB/s",
    higherIsBetter: true,
    get: (r) => r.chunkedPush?.mbps,
  },
  {
    name: `blob pull, ${p.monoCount}×${mib(p.monoSize)}, ${p.concurrency} concurrent`,
    unit: "MB/s",
    higherIsBetter: true,
    get: (r) => r.pullSmall?.mbps,
  },
  {
    name: `blob pull, 1×${mib(p.chunkedSize)}, median of ${p.largePulls ?? 1} after ${
      p.largeWarmup ?? 1
    }`,
    unit: "MB/s",
    higherIsBetter: true,
    get: (r) => r.pullLarge?.mbps,
  },
  {
    name: `blob pull, 1×${mib(p.chunkedSize)}, curl client, median of ${p.largePulls ?? 1}`,
    unit: "MB/s",
    higherIsBetter: true,
    get: (r) => r.pullLargeCurl?.mbps,
  },
  {
    name: `manifest PUT, ${p.manifestCount} manifests, ${p.concurrency} concurrent`,
    unit: "ops/s",
    higherIsBetter: true,
    get: (r) => r.manifestPut?.opsPerSec,
  },
  {
    name: `manifest GET by tag, wrk ${p.wrkConnections} conns ${p.wrkSeconds} s`,
    unit: "req/s",
    higherIsBetter: true,
    get: (r) => r.manifestGetWrk?.reqPerSec,
  },
  {
    name: `manifest GET by tag, wrk p99`,
    unit: "ms",
    higherIsBetter: false,
    get: (r) => r.manifestGetWrk?.p99Ms,
  },
  {
    name: `tags/list (${p.manifestCount} tags), p50 of ${p.tagsListRequests}`,
    unit: "ms",
    higherIsBetter: false,
    get: (r) => r.tagsList?.p50Ms,
  },
  {
    name: `tags/list (${p.manifestCount} tags), p99 of ${p.tagsListRequests}`,
    unit: "ms",
    higherIsBetter: false,
    get: (r) => r.tagsList?.p99Ms,
  },
  {
    name: "server RSS after start",
    unit: "MiB",
    higherIsBetter: false,
    get: (r) => r.rss?.startMiB || undefined,
  },
  {
    name: "server max RSS during the run",
    unit: "MiB",
    higherIsBetter: false,
    get: (r) => r.rss?.maxMiB || undefined,
  },
];

function fmt(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return "—";
  if (n >= 100) return n.toFixed(0);
  if (n >= 10) return n.toFixed(1);
  return n.toFixed(2);
}

const table = [
  "| Measure | Unit | docker-registry 2.8 | Wharf | Ratio (>1 = Wharf better) |",
  "|---|---|---:|---:|---:|",
];
const summary: Record<string, unknown>[] = [];
for (const row of rows) {
  const d = dist ? row.get(dist) : undefined;
  const w = wharf ? row.get(wharf) : undefined;
  const ratio = d !== undefined && w !== undefined && d > 0 && w > 0
    ? (row.higherIsBetter ? w / d : d / w)
    : undefined;
  table.push(
    `| ${row.name} | ${row.unit} | ${fmt(d)} | ${fmt(w)} | ${
      ratio === undefined ? "—" : ratio.toFixed(2) + "×"
    } |`,
  );
  summary.push({ measure: row.name, unit: row.unit, distribution: d, wharf: w, ratio });
}

const notes: string[] = [];
for (const [name, r] of [["docker-registry", dist], ["Wharf", wharf]] as const) {
  if (!r) notes.push(`${name}: no result file`);
  else if (r.failed) notes.push(`${name} FAILED in ${r.failed.phase}:\n${r.failed.error}`);
}

const stamp = new Date().toISOString().replace(/[:.]/g, "-");
const text = [
  `Wharf vs docker-registry, ${new Date().toISOString()}, ${Deno.build.target}, ` +
  `${navigator.hardwareConcurrency} CPUs`,
  "",
  ...table,
  ...(notes.length ? ["", ...notes] : []),
  "",
].join("\n");

await Deno.mkdir(outDir, { recursive: true });
const combined = { generatedAt: new Date().toISOString(), summary, distribution: dist, wharf };
await Deno.writeTextFile(join(outDir, `results-${stamp}.json`), JSON.stringify(combined, null, 2));
await Deno.writeTextFile(join(outDir, `table-${stamp}.md`), text);
await Deno.writeTextFile(join(outDir, "results.json"), JSON.stringify(combined, null, 2));
await Deno.writeTextFile(join(outDir, "table.md"), text);
console.log(text);
Deno.exit(notes.length ? 1 : 0);
