// The scan plan: which files a report reads, merged in this process or in the sandbox that the
// scan job uses for large images (plan_child.ts, fed the listings by listing_frames.ts), with
// the same answer either way.
import assert from "node:assert/strict";
import type { ListedEntry } from "../index/mod.ts";
import { planImage, type ScanPlan } from "./scan_plan.ts";
import { encodeListings, openListings } from "./listing_frames.ts";
import { runSandboxedJson } from "../sandbox/mod.ts";

const BUDGET = { wallSecs: 60, cpuSecs: 60, memoryBytes: 512 << 20 };
const PLAN_CHILD = new URL("./plan_child.ts", import.meta.url);

function entry(path: string, kind: ListedEntry["kind"] = "file", extra = {}): ListedEntry {
  return { path, kind, size: 10, mode: 0o644, offset: 512, ...extra } as unknown as ListedEntry;
}

// Lowest first. The upper layer removes one status.d file, replaces a lockfile's directory and
// links os-release into usr/lib.
const LAYERS: ListedEntry[][] = [
  [
    entry("etc", "dir"),
    entry("usr/lib/os-release"),
    entry("var/lib/dpkg/status"),
    entry("var/lib/dpkg/status.d/base"),
    entry("var/lib/dpkg/status.d/gone"),
    entry("app/package-lock.json"),
    entry("srv/package-lock.json"),
    entry("usr/lib/python3/dist-packages/six-1.16.0.dist-info/METADATA"),
    ...Array.from({ length: 2000 }, (_, i) => entry(`data/f${i}`)),
  ],
  [
    entry("etc/os-release", "symlink", { link_target: "../usr/lib/os-release" }),
    entry("var/lib/dpkg/status.d/gone", "whiteout"),
    entry("srv", "file"),
    entry("var/lib/dpkg/status.d/hard", "hardlink", { link_target: "var/lib/dpkg/status" }),
  ],
];

const ndjson = (es: ListedEntry[]) =>
  new TextEncoder().encode(es.map((e) => JSON.stringify(e)).join("\n") + "\n");

/** A stream of `bytes` in pieces of `size`, as a store might hand them out. */
function pieces(bytes: Uint8Array, size: number): ReadableStream<Uint8Array> {
  const out: Uint8Array[] = [];
  for (let i = 0; i < bytes.length; i += size) out.push(bytes.slice(i, i + size));
  return ReadableStream.from(out);
}

async function inline(): Promise<ScanPlan> {
  return await planImage(
    LAYERS.map((es) => () =>
      (async function* () {
        yield* es;
      })()
    ),
    100,
  );
}

Deno.test("scan plan: databases, status.d, lockfiles and Python paths of the merged image", async () => {
  const plan = await inline();
  assert.deepEqual(
    plan.files.map((f) => [f.path, f.kind, f.layer, f.entry.kind]),
    [
      ["etc/os-release", "database", 0, "file"],
      ["usr/lib/os-release", "database", 0, "file"],
      ["var/lib/dpkg/status", "database", 0, "file"],
      ["var/lib/dpkg/status.d/base", "database", 0, "file"],
      ["app/package-lock.json", "lockfile", 0, "file"],
    ],
  );
  assert.deepEqual(plan.pythonPaths, [
    "usr/lib/python3/dist-packages/six-1.16.0.dist-info/METADATA",
  ]);
  // status.d/hard is a hardlink: planned as one (the scanner follows it with the listings)
  const withHard = await planImage(
    LAYERS.map((es) => () =>
      (async function* () {
        yield* es.map((e) => e.kind === "hardlink" ? { ...e, path: "etc/redhat-release" } : e);
      })()
    ),
    100,
  );
  assert.ok(withHard.files.some((f) => f.path === "etc/redhat-release" && f.layer === 1));
});

Deno.test("scan plan: status.d files past max_packages are left out, with a warning", async () => {
  const layer = Array.from({ length: 30 }, (_, i) => entry(`var/lib/dpkg/status.d/p${i}`));
  const plan = await planImage([() =>
    (async function* () {
      yield* layer;
    })()], 10);
  assert.equal(plan.files.length, 10);
  assert.match(plan.warnings.join(), /30 files in var\/lib\/dpkg\/status\.d\/: the first 10/);
});

Deno.test("scan plan: the listings framed for the sandbox decode to the same plan", async () => {
  for (const size of [1, 7, 4096, 1 << 20]) {
    const frames = encodeListings([
      LAYERS.map((es) => () => Promise.resolve(pieces(ndjson(es), size))),
    ]);
    // re-chunked on the way, as a pipe does
    const all: Uint8Array[] = [];
    for await (const f of frames) all.push(f.slice());
    const joined = new Uint8Array(all.reduce((n, b) => n + b.length, 0));
    let at = 0;
    for (const b of all) joined.set(b, (at += b.length) - b.length);
    const plan = await planImage(
      openListings({ counts: [LAYERS.length] }, () => pieces(joined, 3001))[0],
      100,
    );
    assert.deepEqual(plan, await inline(), `pieces of ${size}`);
  }
});

Deno.test("scan plan: the sandbox process gives the same plan; a layer without a listing is empty", async () => {
  const plan = await runSandboxedJson<ScanPlan>({
    label: "scan",
    module: PLAN_CHILD,
    args: { listings: { counts: [LAYERS.length] }, maxPackages: 100 },
    stdin: ReadableStream.from(
      encodeListings([LAYERS.map((es) => () => Promise.resolve(pieces(ndjson(es), 777)))]),
    ),
    budget: BUDGET,
  });
  assert.deepEqual(plan, await inline());
  const upperOnly = await runSandboxedJson<ScanPlan>({
    label: "scan",
    module: PLAN_CHILD,
    args: { listings: { counts: [2] }, maxPackages: 100 },
    stdin: ReadableStream.from(
      encodeListings([[null, () => Promise.resolve(pieces(ndjson(LAYERS[1]), 777))]]),
    ),
    budget: BUDGET,
  });
  assert.deepEqual(upperOnly.files, []);
});

Deno.test("scan plan: cut or disordered frames are an error, never a hang", async () => {
  const frames: Uint8Array[] = [];
  for await (
    const f of encodeListings([
      LAYERS.map((es) => () => Promise.resolve(pieces(ndjson(es), 500))),
    ])
  ) frames.push(f.slice());
  const joined = new Uint8Array(frames.reduce((n, b) => n + b.length, 0));
  let at = 0;
  for (const b of frames) joined.set(b, (at += b.length) - b.length);
  for (const cut of [3, 100, joined.length - 5]) {
    await assert.rejects(
      planImage(
        openListings({ counts: [LAYERS.length] }, () => pieces(joined.slice(0, cut), 64))[0],
        100,
      ),
      /ended early|JSON/,
    );
  }
  const layers = openListings({ counts: [LAYERS.length] }, () => pieces(joined, 64))[0];
  assert.throws(() => layers[0](), /out of order/);
});

Deno.test("scan plan: a sandbox allowed to read the listing files gives the same plan", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wharf-plan-" });
  try {
    const paths = await Promise.all(LAYERS.map(async (es, i) => {
      const p = `${dir}/listing-${i}.ndjson`;
      await Deno.writeFile(p, ndjson(es));
      return p;
    }));
    const plan = await runSandboxedJson<ScanPlan>({
      label: "scan",
      module: PLAN_CHILD,
      args: { listings: { counts: [LAYERS.length], paths: [paths] }, maxPackages: 100 },
      readPaths: paths,
      budget: BUDGET,
    });
    assert.deepEqual(plan, await inline());
    // only the files it was given: another file is refused
    await assert.rejects(
      runSandboxedJson<ScanPlan>({
        label: "scan",
        module: PLAN_CHILD,
        args: {
          listings: { counts: [2], paths: [[paths[0], `${dir}/../etc-passwd`]] },
          maxPackages: 100,
        },
        readPaths: [paths[0]],
        budget: BUDGET,
      }),
      /NotCapable|permission|read access/i,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
