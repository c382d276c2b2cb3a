// DESIGN.md §Layout: which folder may import which, no Hono in lib/, no cycles between lib
// folders, routes/ only through lib/*/mod.ts (or the folder's public files).
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
  metadata: ["oci", "config"],
  jobs: ["oci", "config", "metadata"],
  upstream: ["oci", "config", "streams", "http"],
  audit: ["oci", "config", "metadata", "jobs"],
  events: ["oci", "config", "streams", "http", "metadata", "jobs", "audit"],
  quota: ["oci", "config", "metadata"],
  registry: [
    "oci",
    "config",
    "streams",
    "storage",
    "metadata",
    "jobs",
    "upstream",
    "events",
    "quota",
  ],
  sandbox: ["oci", "config", "streams"],
  index: [
    "oci",
    "config",
    "streams",
    "storage",
    "metadata",
    "jobs",
    "upstream",
    "registry",
    "sandbox",
  ],
  scan: [
    "oci",
    "config",
    "streams",
    "storage",
    "metadata",
    "jobs",
    "upstream",
    "registry",
    "index",
    "sandbox",
  ],
  replication: ["oci", "config", "streams", "storage", "metadata", "jobs", "upstream", "registry"],
  sync: ["oci", "config", "streams", "storage", "metadata", "jobs", "upstream", "registry"],
  retention: ["oci", "config", "metadata", "jobs", "registry", "events"],
  policy: ["oci", "config"],
  ratelimit: ["oci", "config", "metadata", "policy"],
  auth: ["oci", "config", "streams", "http"],
};

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

Deno.test("routes/ reaches no storage or KV module directly", async () => {
  const problems: string[] = [];
  for await (const file of tsFiles(join(ROOT, "routes"))) {
    for (const spec of imports(await Deno.readTextFile(file))) {
      if (/lib\/(storage|metadata)\//.test(spec)) {
        problems.push(`${relative(ROOT, file)} imports ${spec}`);
      }
    }
  }
  assert.deepEqual(problems, []);
});
