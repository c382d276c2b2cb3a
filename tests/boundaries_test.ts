// DESIGN.md §Layout: which folder may import which, no Hono in lib/, no cycles between lib
// folders or among the files of one folder, a lib folder reached from outside only through
// its mod.ts (its public surface), and in the folders that keep records of their own above
// lib/metadata (index, scan, replication, sync) only their store files holding the KV.
import assert from "node:assert/strict";
import { dirname, join, normalize, relative } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../", import.meta.url));

const ALLOWED: Record<string, string[]> = {
  oci: [],
  config: ["oci"],
  streams: ["oci"],
  http: ["streams"],
  storage: ["oci", "config", "streams", "http"],
  // The KV platform (lib/kv): every key, the commit limits, the one commit-retry loop, opening
  // the KV. Every folder that keeps records in KV stands on it; lib/metadata is the registry's
  // own records only, so a folder needing keys and commits alone (jobs, audit, events,
  // ratelimit, retention) imports lib/kv and not lib/metadata.
  kv: ["oci"],
  metadata: ["oci", "config", "kv"],
  // What a write causes (lib/effects): below every subscriber, above the metadata writes' port.
  effects: ["oci", "config", "kv", "metadata"],
  jobs: ["oci", "config", "kv"],
  upstream: ["oci", "config", "streams", "http"],
  audit: ["oci", "config", "kv", "jobs"],
  events: ["oci", "config", "streams", "http", "kv", "jobs", "audit", "effects"],
  quota: ["oci", "config", "kv", "metadata"],
  // The pull-through cache: below the registry, which builds it and hands it its manifests and
  // signature rules through narrow ports (lib/pull_through/ports.ts) instead of being imported.
  pull_through: ["oci", "config", "streams", "storage", "kv", "metadata", "jobs", "upstream"],
  registry: [
    "oci",
    "config",
    "streams",
    "storage",
    "kv",
    "metadata",
    "jobs",
    "upstream",
    "events",
    "quota",
    "effects",
    "pull_through",
    // verified before visible (issue 34): the registry judges pushes with the engine
    "signatures",
  ],
  sandbox: ["oci", "config", "streams"],
  // The layer index: below the scan, which asks it for a layer's record and to queue its indexing
  // (LayerIndexReader). It never imports lib/scan.
  index: [
    "oci",
    "config",
    "streams",
    "storage",
    "kv",
    "metadata",
    "jobs",
    "upstream",
    "registry",
    "sandbox",
    "effects",
  ],
  scan: [
    "oci",
    "config",
    "streams",
    "storage",
    "kv",
    "metadata",
    "jobs",
    "upstream",
    "registry",
    // scan → index: a scan reads its layers' listings and records through the layer index
    "index",
    "sandbox",
    "effects",
  ],
  replication: [
    "oci",
    "config",
    "streams",
    "storage",
    "kv",
    "metadata",
    "jobs",
    "upstream",
    "registry",
    "effects",
  ],
  sync: [
    "oci",
    "config",
    "streams",
    "storage",
    "kv",
    "metadata",
    "jobs",
    "upstream",
    "registry",
    "effects",
  ],
  retention: ["oci", "config", "kv", "jobs", "registry", "events", "effects"],
  policy: ["oci", "config"],
  // Signature verification is pure (bytes in, a verdict out): it reads only its trust config.
  signatures: ["oci", "config"],
  ratelimit: ["oci", "config", "kv", "policy"],
  auth: ["oci", "config", "streams", "http"],
};

// The composition root (lib/services) may build from every other folder; none imports it back.
ALLOWED.services = [...Deno.readDirSync(join(ROOT, "lib"))]
  .filter((e) => e.isDirectory && e.name !== "services").map((e) => e.name);

async function* tsFiles(dir: string): AsyncGenerator<string> {
  for await (const e of Deno.readDir(dir)) {
    const p = join(dir, e.name);
    if (e.isDirectory) yield* tsFiles(p);
    else if (e.name.endsWith(".ts") && !e.name.endsWith("_test.ts")) yield p;
  }
}

function imports(src: string): string[] {
  return [...src.matchAll(/^\s*(?:import|export)[^"']*?from\s+["']([^"']+)["']/gm)].map((m) =>
    m[1]
  );
}

Deno.test("lib/ folders import only what DESIGN.md allows, and never Hono", async () => {
  const problems: string[] = [];
  for await (const file of tsFiles(join(ROOT, "lib"))) {
    const rel = relative(join(ROOT, "lib"), file);
    const folder = rel.includes("/") ? rel.split("/")[0] : null; // lib/log.ts is a leaf
    for (const spec of imports(await Deno.readTextFile(file))) {
      if (spec === "hono" || spec.startsWith("hono/") || spec.startsWith("npm:hono")) {
        problems.push(`${rel} imports hono`);
      }
      if (!spec.startsWith(".")) continue;
      const target = relative(join(ROOT, "lib"), normalize(join(dirname(file), spec)));
      if (target.startsWith("..")) problems.push(`${rel} imports outside lib: ${spec}`);
      const tf = target.includes("/") ? target.split("/")[0] : null;
      if (folder === null || tf === null || tf === folder) continue;
      if (!(ALLOWED[folder] ?? []).includes(tf)) {
        problems.push(`${rel} → ${target} (lib/${folder} may not import lib/${tf})`);
      }
    }
  }
  assert.deepEqual(problems, []);
});

Deno.test("the scan stands on the layer index, never the other way", async () => {
  assert.ok(ALLOWED.scan.includes("index"), "lib/scan may import lib/index");
  assert.ok(!ALLOWED.index.includes("scan"), "lib/index may not import lib/scan");
  // the edge is real: the scan reaches the layer index through its mod.ts
  const scanner = await Deno.readTextFile(join(ROOT, "lib/scan/scanner.ts"));
  assert.ok(imports(scanner).includes("../index/mod.ts"));
});

/**
 * The folders above lib/metadata that keep records of their own, and the files that hold the KV
 * for them (the folder's stores); every other file of the folder, and every other folder, reaches
 * those records through a store or the folder's narrow readers (LayerIndexReader, Reports, …).
 */
const KV_HOLDERS: Record<string, string[]> = {
  index: ["index_records.ts"],
  scan: ["scan_records.ts", "advisory_store.ts"],
  replication: ["state.ts"],
  sync: ["state.ts"],
};

/** The raw KV handles `src` holds, comments aside: the type, opening one, or a call on one. */
function rawKv(src: string): string[] {
  const code = src.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|\s)\/\/.*$/gm, "");
  const re =
    /\bDeno\.Kv\b|\bDeno\.openKv\b|\bopenMetadata\b|\.atomic\(\)|\bkv\.(?:get|getMany|list|set|delete|atomic|enqueue)\b/g;
  return [...code.matchAll(re)].map((m) => m[0]);
}

Deno.test("in lib/index, lib/scan, lib/replication and lib/sync only the store files hold the KV", async () => {
  const problems: string[] = [];
  for (const [folder, stores] of Object.entries(KV_HOLDERS)) {
    for await (const file of tsFiles(join(ROOT, "lib", folder))) {
      const rel = relative(join(ROOT, "lib", folder), file);
      if (stores.includes(rel)) continue;
      const found = rawKv(await Deno.readTextFile(file));
      if (found.length) problems.push(`lib/${folder}/${rel}: ${[...new Set(found)].join(", ")}`);
    }
    for (const store of stores) {
      assert.ok(rawKv(await Deno.readTextFile(join(ROOT, "lib", folder, store))).length > 0);
    }
  }
  assert.deepEqual(problems, []);
  // the check itself finds the type, a call and an open, and passes key types and comments
  assert.deepEqual(rawKv("constructor(private readonly kv: Deno.Kv) {}"), ["Deno.Kv"]);
  assert.deepEqual(rawKv("const e = await this.kv.get(k);"), ["kv.get"]);
  assert.deepEqual(rawKv("const op = deps.kv.atomic();"), ["kv.atomic"]);
  assert.deepEqual(rawKv("const op = this.db.atomic();"), [".atomic()"]);
  assert.deepEqual(rawKv("await openMetadata(path);"), ["openMetadata"]);
  assert.deepEqual(rawKv("key: Deno.KvKey; // a Deno.Kv is not held\n/** kv.get */"), []);
  assert.deepEqual(rawKv('const u = "http://x"; kv.list(p);'), ["kv.list"]);
});

Deno.test("routes/ reaches no storage or KV module directly", async () => {
  const problems: string[] = [];
  for await (const file of tsFiles(join(ROOT, "routes"))) {
    for (const spec of imports(await Deno.readTextFile(file))) {
      if (/lib\/(storage|kv|metadata)\//.test(spec)) {
        problems.push(`${relative(ROOT, file)} imports ${spec}`);
      }
    }
  }
  assert.deepEqual(problems, []);
});

Deno.test("no lib/ folder imports lib/services, the composition root", async () => {
  const problems: string[] = [];
  for await (const file of tsFiles(join(ROOT, "lib"))) {
    const rel = relative(join(ROOT, "lib"), file);
    if (rel.startsWith("services/")) continue;
    for (const spec of imports(await Deno.readTextFile(file))) {
      const target = relative(join(ROOT, "lib"), normalize(join(dirname(file), spec)));
      if (spec.startsWith(".") && target.startsWith("services/")) {
        problems.push(`${rel} → ${target}`);
      }
    }
  }
  assert.deepEqual(problems, []);
});

/**
 * An import by `file` (relative to the root) of `spec` that goes past a lib folder's mod.ts, as
 * "file → target", or null. Inside its own folder a file imports its neighbours freely; from
 * anywhere else (another lib folder, lib/services, routes/, commands/, deploy/, main.ts) a lib
 * folder is its mod.ts. Beside the folders, lib/ holds one leaf of its own: lib/log.ts.
 */
function bypass(file: string, spec: string): string | null {
  if (!spec.startsWith(".")) return null;
  const target = relative(ROOT, normalize(join(ROOT, dirname(file), spec)));
  if (/^lib\/[^/]+$/.test(target)) return target === "lib/log.ts" ? null : `${file} → ${target}`;
  const m = /^lib\/([^/]+)\/(.+)$/.exec(target);
  if (!m || m[2] === "mod.ts" || file.startsWith(`lib/${m[1]}/`)) return null;
  return `${file} → ${target}`;
}

Deno.test("a lib/ folder is reached from outside it only through its mod.ts", async () => {
  const files = [join(ROOT, "main.ts")];
  for (const top of ["lib", "routes", "commands", "deploy"]) {
    for await (const file of tsFiles(join(ROOT, top))) files.push(file);
  }
  const problems: string[] = [];
  for (const file of files) {
    const rel = relative(ROOT, file);
    for (const spec of imports(await Deno.readTextFile(file))) {
      const problem = bypass(rel, spec);
      if (problem) problems.push(problem);
    }
  }
  assert.deepEqual(problems, []);
  // the check itself tells a bypass from a neighbour, a mod.ts and the lib/log.ts leaf
  assert.equal(bypass("routes/x.ts", "../lib/oci/errors.ts"), "routes/x.ts → lib/oci/errors.ts");
  assert.equal(bypass("lib/scan/x.ts", "../oci/errors.ts"), "lib/scan/x.ts → lib/oci/errors.ts");
  assert.equal(
    bypass("commands/x.ts", "../lib/jobs/queue.ts"),
    "commands/x.ts → lib/jobs/queue.ts",
  );
  assert.equal(bypass("lib/oci/x.ts", "./errors.ts"), null);
  assert.equal(bypass("lib/scan/x.ts", "../oci/mod.ts"), null);
  assert.equal(bypass("commands/x.ts", "../lib/log.ts"), null);
  assert.equal(bypass("deploy/x.ts", "../lib/other.ts"), "deploy/x.ts → lib/other.ts");
  assert.equal(bypass("lib/scan/x.ts", "npm:semver"), null);
});

/** What a mod.ts holds besides its module comment and re-exports (nothing, when it is a surface). */
function beyondReExports(src: string): string {
  return src
    .replace(/^\s*\/\/.*$/gm, "")
    .replace(/\/\*[\s\S]*?\*\//g, "")
    .replace(/^\s*export\s+(type\s+)?(\*|\{[^}]*\})\s*from\s*["'][^"']+["'];?/gm, "")
    .trim();
}

Deno.test("each lib/*/mod.ts is a public surface: a module comment, then re-exports only", async () => {
  const problems: string[] = [];
  for await (const e of Deno.readDir(join(ROOT, "lib"))) {
    if (!e.isDirectory) continue;
    const src = await Deno.readTextFile(join(ROOT, "lib", e.name, "mod.ts"));
    if (!src.startsWith("//")) problems.push(`lib/${e.name}/mod.ts has no module comment`);
    const rest = beyondReExports(src);
    if (rest) {
      problems.push(
        `lib/${e.name}/mod.ts holds more than re-exports: ${
          rest.replace(/\s+/g, " ").slice(0, 60)
        }`,
      );
    }
  }
  assert.deepEqual(problems, []);
  // the check itself passes re-exports and catches an implementation
  assert.equal(
    beyondReExports('// x\nexport { a, type B } from "./a.ts";\nexport * from "./c.ts";'),
    "",
  );
  assert.equal(beyondReExports('export type {\n  A,\n} from "./a.ts";\n'), "");
  assert.notEqual(beyondReExports('import { a } from "./a.ts";\nexport const b = a;\n'), "");
});

/** The test-only environment variables (WHARF_TEST_…) `src` names, comments aside. */
function testKnobs(src: string): string[] {
  const code = src.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  return [...code.matchAll(/WHARF_TEST_[A-Z0-9_]+/g)].map((m) => m[0]);
}

Deno.test("no lib/ or routes/ module reads a test knob: the entry points pass it in", async () => {
  const problems: string[] = [];
  for (const top of ["lib", "routes"]) {
    for await (const file of tsFiles(join(ROOT, top))) {
      for (const knob of testKnobs(await Deno.readTextFile(file))) {
        problems.push(`${relative(ROOT, file)} reads ${knob}`);
      }
    }
  }
  assert.deepEqual(problems, []);
  // the check itself finds a read and passes a comment naming one
  assert.deepEqual(testKnobs('const v = Deno.env.get("WHARF_TEST_CACHE_HOLD_MS");'), [
    "WHARF_TEST_CACHE_HOLD_MS",
  ]);
  assert.deepEqual(testKnobs("// WHARF_TEST_X is read by commands/\n/** WHARF_TEST_Y */"), []);
});

Deno.test("nothing in lib/ or routes/ imports commands/ or main.ts", async () => {
  const problems: string[] = [];
  for (const top of ["lib", "routes"]) {
    for await (const file of tsFiles(join(ROOT, top))) {
      for (const spec of imports(await Deno.readTextFile(file))) {
        const target = relative(ROOT, normalize(join(dirname(file), spec)));
        if (target === "main.ts" || target.startsWith("commands/")) {
          problems.push(`${relative(ROOT, file)} imports ${target}`);
        }
      }
    }
  }
  assert.deepEqual(problems, []);
});

/** Each file of `dir` (tests aside) → the files of `dir` it imports, type-only imports included. */
async function folderGraph(dir: string): Promise<Map<string, string[]>> {
  const graph = new Map<string, string[]>();
  for await (const file of tsFiles(dir)) {
    const deps = imports(await Deno.readTextFile(file))
      .filter((spec) => spec.startsWith("."))
      .map((spec) => relative(dir, normalize(join(dirname(file), spec))))
      .filter((target) => !target.startsWith(".."));
    graph.set(relative(dir, file), deps);
  }
  return graph;
}

const routesGraph = () => folderGraph(join(ROOT, "routes"));

/** The first import cycle found, as the files along it, or null. */
function findCycle(graph: Map<string, string[]>): string[] | null {
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const visit = (node: string): string[] | null => {
    if (state.get(node) === "done") return null;
    if (state.get(node) === "open") return [...path.slice(path.indexOf(node)), node];
    state.set(node, "open");
    path.push(node);
    for (const dep of graph.get(node) ?? []) {
      const cycle = visit(dep);
      if (cycle) return cycle;
    }
    path.pop();
    state.set(node, "done");
    return null;
  };
  for (const node of [...graph.keys()].sort()) {
    const cycle = visit(node);
    if (cycle) return cycle;
  }
  return null;
}

Deno.test("no routes/ file imports routes/app.ts (handlers get a RequestScope)", async () => {
  const importers = [...(await routesGraph())]
    .filter(([, deps]) => deps.includes("app.ts"))
    .map(([file]) => file);
  assert.deepEqual(importers, []);
});

Deno.test("routes/ files import each other without cycles", async () => {
  assert.equal(findCycle(await routesGraph()), null);
  // the check itself finds one
  const circle = new Map([["a.ts", ["b.ts"]], ["b.ts", ["a.ts"]], ["c.ts", []]]);
  assert.deepEqual(findCycle(circle), ["a.ts", "b.ts", "a.ts"]);
});

Deno.test("the files inside each lib/ folder import each other without cycles", async () => {
  const cycles: string[] = [];
  for await (const e of Deno.readDir(join(ROOT, "lib"))) {
    if (!e.isDirectory) continue;
    const cycle = findCycle(await folderGraph(join(ROOT, "lib", e.name)));
    if (cycle) cycles.push(`lib/${e.name}: ${cycle.join(" → ")}`);
  }
  assert.deepEqual(cycles, []);
  // the check itself finds one made of a type-only import, in files on disk
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(
      join(dir, "a.ts"),
      'import type { B } from "./b.ts";\nexport type A = B;\n',
    );
    await Deno.writeTextFile(
      join(dir, "b.ts"),
      'import { a } from "./c.ts";\nexport type B = 1;\n',
    );
    await Deno.writeTextFile(
      join(dir, "c.ts"),
      'export { type A } from "./a.ts";\nexport const a = 1;\n',
    );
    await Deno.writeTextFile(join(dir, "d.ts"), 'import { a } from "./c.ts";\n');
    assert.deepEqual(findCycle(await folderGraph(dir)), ["a.ts", "b.ts", "c.ts", "a.ts"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
