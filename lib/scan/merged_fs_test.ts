import assert from "node:assert/strict";
import type { ListedEntry } from "../index/mod.ts";
import { fc, fuzzParams } from "../../tests/helpers/fuzz.ts";
import { mergeLayers, resolvePath } from "./merged_fs.ts";

const e = (path: string, kind = "file", size = 10, link_target?: string): ListedEntry => ({
  path,
  kind,
  size,
  mode: 0o644,
  uid: 0,
  gid: 0,
  mtime: 0,
  offset: 0,
  ...(link_target ? { link_target } : {}),
});

const layers = (...ls: ListedEntry[][]) =>
  ls.map((l) => () =>
    (async function* () {
      yield* l;
    })()
  );

Deno.test("whiteouts, opaque directories and replaced directories hide lower entries", async () => {
  const r = await mergeLayers(layers(
    [
      e("etc", "dir", 0),
      e("etc/a", "file", 100),
      e("etc/b", "file", 200),
      e("opt", "dir", 0),
      e("opt/x", "file", 300),
      e("usr", "dir", 0),
      e("usr/lib", "dir", 0),
      e("usr/lib/old", "file", 400),
      e("var", "dir", 0),
      e("var/keep", "file", 1),
    ],
    [
      e("etc/a", "file", 101), // overwrites
      e("etc/b", "whiteout", 0), // deletes
      e("opt", "opaque", 0), // empties opt of lower content
      e("opt/y", "file", 5),
      e("usr/lib", "symlink", 0, "../lib"), // replaces a directory
    ],
    [e("opt/y", "whiteout", 0), e("etc/c", "file", 7)],
  ));
  const paths = [...r.files.keys()].sort();
  assert.deepEqual(paths, ["etc", "etc/a", "etc/c", "opt", "usr", "usr/lib", "var", "var/keep"]);
  assert.equal(r.files.get("etc/a")!.layer, 1);
  assert.equal(r.files.get("etc/a")!.entry.size, 101);
  assert.equal(r.files.get("usr/lib")!.entry.kind, "symlink");
  // Layer 0 lost etc/a (100), etc/b (200), opt/x (300), usr/lib/old (400); layer 1 lost opt/y.
  assert.deepEqual(r.wastedByLayer, [1000, 5, 0]);
  assert.deepEqual(r.bytesByLayer, [1001, 106, 7]);
});

Deno.test("keep() limits what is kept, not what hides", async () => {
  const r = await mergeLayers(
    layers([e("a/status"), e("b/status")], [e("a/status", "whiteout", 0)]),
    (x) => x.path.endsWith("status"),
  );
  assert.deepEqual([...r.files.keys()], ["b/status"]);
});

Deno.test("resolvePath follows absolute and relative links, and gives up on loops", () => {
  const files = new Map([
    ["var/lib/rpm", {
      layer: 0,
      entry: e("var/lib/rpm", "symlink", 0, "../../usr/lib/sysimage/rpm"),
    }],
    ["etc/os-release", {
      layer: 0,
      entry: e("etc/os-release", "symlink", 0, "../usr/lib/os-release"),
    }],
    ["lib", { layer: 0, entry: e("lib", "symlink", 0, "/usr/lib") }],
    ["loop", { layer: 0, entry: e("loop", "symlink", 0, "loop2") }],
    ["loop2", { layer: 0, entry: e("loop2", "symlink", 0, "/loop") }],
  ]);
  assert.equal(resolvePath(files, "var/lib/rpm/rpmdb.sqlite"), "usr/lib/sysimage/rpm/rpmdb.sqlite");
  assert.equal(resolvePath(files, "etc/os-release"), "usr/lib/os-release");
  assert.equal(resolvePath(files, "lib/apk/db/installed"), "usr/lib/apk/db/installed");
  assert.equal(resolvePath(files, "a/./b/../c"), "a/c");
  assert.equal(resolvePath(files, "loop/x"), null);
  assert.equal(resolvePath(files, "../../etc/passwd"), "etc/passwd");
});

// Hostile shapes: one pushed ~1 KiB layer can hold a 1 MiB PAX path or link target. Merging and
// resolving walk each path once; a quadratic regression takes seconds to minutes on these
// (1 MiB path: minutes; a link to `x/` × 30,000: 4.6 s per resolved path before), so the bound
// is a correctness guard, not a benchmark.
const FAST_MS = 2000;

async function timed<T>(what: string, f: () => Promise<T> | T): Promise<T> {
  const t0 = performance.now();
  const r = await f();
  const ms = performance.now() - t0;
  assert.ok(ms < FAST_MS, `${what} took ${ms.toFixed(0)} ms`);
  return r;
}

Deno.test("merge: a 1 MiB path of `p/` segments, hidden and kept as it should be", async () => {
  const deep = "p/".repeat(512 * 1024 - 1) + "p"; // 1 MiB, 524,288 segments
  const half = "p/".repeat(256 * 1024 - 1) + "p";
  const r = await timed("merge", () =>
    mergeLayers(layers(
      [e(`${deep}/under`, "file", 2), e(`${half}/q`, "file", 3), e("top", "file", 1)],
      [e(`${half}/q`, "whiteout", 0), e(deep, "file", 7)], // a file over a directory
      [e(deep, "file", 5)],
    )));
  assert.deepEqual([...r.files.keys()].map((k) => k.length).sort((a, b) => a - b), [
    3,
    deep.length,
  ]);
  assert.equal(r.files.get(deep)!.layer, 2);
  assert.deepEqual(r.wastedByLayer, [5, 7, 0]);
  assert.deepEqual(r.bytesByLayer, [6, 7, 5]);
  const opaque = await timed(
    "merge with an opaque marker",
    () => mergeLayers(layers([e(deep, "file", 5), e("top", "file", 1)], [e(half, "opaque", 0)])),
  );
  assert.deepEqual([...opaque.files.keys()], ["top"]);
});

Deno.test("merge: 200,000 nested directories replaced by a file half-way down", async () => {
  const dirs = Array.from({ length: 200_000 }, () => "d");
  const deep = dirs.join("/");
  const mid = dirs.slice(0, 100_000).join("/");
  const lower = [e(deep, "dir", 0), e(`${deep}/f`, "file", 10), e(mid, "dir", 0)];
  const r = await timed(
    "merge",
    () => mergeLayers(layers(lower, [e(mid, "symlink", 0, "/tmp")], [e(`${deep}/g`, "file", 1)])),
  );
  // `${deep}/g` of the top layer is visible (nothing above it); below, mid's subtree is gone.
  assert.deepEqual([...r.files.keys()].map((k) => k.length).sort((a, b) => a - b), [
    mid.length,
    deep.length + 2,
  ]);
  assert.equal(r.files.get(mid)!.entry.kind, "symlink");
  assert.deepEqual(r.wastedByLayer, [10, 0, 0]);
});

Deno.test("resolvePath: links to `x/` × 30,000 and × 300,000 resolve in one pass", async () => {
  for (const [n, calls] of [[30_000, 20], [300_000, 4]]) {
    const files = new Map([["etc", { layer: 0, entry: e("etc", "symlink", 0, "x/".repeat(n)) }]]);
    const r = await timed(`x/ × ${n}`, () => {
      let out = null;
      // as the scanner does: once per package-database path
      for (let i = 0; i < calls; i++) out = resolvePath(files, `etc/db${i}`);
      return out;
    });
    assert.equal(r, "x/".repeat(n) + `db${calls - 1}`);
  }
});

Deno.test("resolvePath: loops, link chains and `..` escapes end fast and inside the tree", async () => {
  const link = (path: string, target: string) =>
    [path, {
      layer: 0,
      entry: e(path, "symlink", 0, target),
    }] as const;
  const files = new Map([
    link("a", "b"),
    link("b", "/a"),
    link("self", "self/self"), // grows at every hop
    link("dot", "."),
    link("many", "dot/".repeat(300_000) + "etc"), // 300,000 hops wanted, 40 allowed
    link("up", "../".repeat(300_000) + "etc/passwd"),
    link("updown", "x/".repeat(400_000) + "../".repeat(400_000) + "updown"), // 4 MiB per hop
    link("deep", "../".repeat(50) + "usr/lib"),
  ]);
  const r = await timed(
    "resolve",
    () =>
      ["a/x", "self", "many/x", "up", "updown", "deep/x", "dot/dot/dot/z", "../".repeat(1e5) + "q"]
        .map((p) => resolvePath(files, p)),
  );
  assert.deepEqual(r, [null, null, null, "etc/passwd", null, "usr/lib/x", "z", "q"]);
  const files2 = new Map([link("d", "dot/".repeat(20) + "d2"), link("d2", "dot/dot/ok")]);
  files2.set("dot", files.get("dot")!);
  // 20 + 1 + 2 + 1 hops: within Linux's 40
  assert.equal(resolvePath(files2, "d/f"), "ok/f");
});

Deno.test("resolvePath on mergeLayers' map keeps its link tree across calls, and sees changes", async () => {
  const r = await mergeLayers(layers([e("lib", "symlink", 0, "usr/lib"), e("usr/lib/x")]));
  assert.equal(resolvePath(r.files, "lib/x"), "usr/lib/x");
  r.files.set("usr", { layer: 0, entry: e("usr", "symlink", 0, "/opt") });
  assert.equal(resolvePath(r.files, "lib/x"), "opt/lib/x");
  r.files.delete("lib");
  assert.equal(resolvePath(r.files, "lib/x"), "lib/x");
});

// The prefix-scanning implementations these replaced (quadratic, fine on small inputs): the
// rewrite must agree with them on every input, odd spellings included.
function referenceMerge(ls: ListedEntry[][]) {
  const ancestors = function* (path: string) {
    let i = path.indexOf("/");
    while (i > 0) {
      yield path.slice(0, i);
      i = path.indexOf("/", i + 1);
    }
  };
  const files = new Map<string, { layer: number; entry: ListedEntry }>();
  const defined = new Set<string>(), gone = new Set<string>(), opaque = new Set<string>();
  const wasted = ls.map(() => 0), bytes = ls.map(() => 0);
  for (let li = ls.length - 1; li >= 0; li--) {
    const wh: string[] = [], op: string[] = [], nd: string[] = [], here: string[] = [];
    for (const x of ls[li]) {
      if (x.kind === "whiteout") {
        wh.push(x.path);
        continue;
      }
      if (x.kind === "opaque") {
        op.push(x.path);
        continue;
      }
      if (x.kind === "file") bytes[li] += x.size;
      let hidden = defined.has(x.path) || gone.has(x.path);
      for (const a of hidden ? [] : ancestors(x.path)) {
        if (gone.has(a) || opaque.has(a)) {
          hidden = true;
          break;
        }
      }
      if (hidden) {
        if (x.kind === "file") wasted[li] += x.size;
        continue;
      }
      here.push(x.path);
      if (x.kind !== "dir") nd.push(x.path);
      files.set(x.path, { layer: li, entry: x });
    }
    for (const p of here) defined.add(p);
    for (const p of [...wh, ...nd]) gone.add(p);
    for (const p of op) opaque.add(p);
  }
  return { files, wastedByLayer: wasted, bytesByLayer: bytes };
}

function referenceResolve(files: Map<string, { entry: ListedEntry }>, path: string) {
  let parts = path.split("/").filter((p) => p && p !== ".");
  let hops = 0;
  for (let i = 0; i < parts.length; i++) {
    if (parts[i] === "..") {
      parts.splice(Math.max(0, i - 1), i > 0 ? 2 : 1);
      i = Math.max(-1, i - 2);
      continue;
    }
    const m = files.get(parts.slice(0, i + 1).join("/"));
    if (m?.entry.kind !== "symlink") continue;
    if (++hops > 40) return null;
    const target = m.entry.link_target ?? "";
    const base = target.startsWith("/") ? [] : parts.slice(0, i);
    parts = [...base, ...target.split("/").filter((p) => p && p !== "."), ...parts.slice(i + 1)];
    i = -1;
  }
  return parts.join("/");
}

// Few segment names, so paths collide, nest and shadow each other often.
const pathArb = fc.array(fc.constantFrom("a", "b", "c", "", ".", ".."), {
  minLength: 1,
  maxLength: 5,
}).map((s) => s.join("/"));
const entryArb = fc.record({
  path: pathArb,
  kind: fc.constantFrom("file", "dir", "symlink", "whiteout", "opaque", "hardlink"),
  size: fc.nat(100),
  target: fc.oneof(pathArb, pathArb.map((p) => "/" + p), fc.constant("")),
}).map((x) => e(x.path, x.kind, x.size, x.kind === "symlink" ? x.target : undefined));

Deno.test("mergeLayers and resolvePath agree with the prefix-scanning versions (property)", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.array(entryArb, { maxLength: 12 }), { minLength: 1, maxLength: 4 }),
      fc.array(pathArb, { minLength: 1, maxLength: 6 }),
      async (ls, lookups) => {
        const got = await mergeLayers(layers(...ls));
        const want = referenceMerge(ls);
        assert.deepEqual([...got.files.entries()], [...want.files.entries()]);
        assert.deepEqual(got.wastedByLayer, want.wastedByLayer);
        assert.deepEqual(got.bytesByLayer, want.bytesByLayer);
        for (const p of lookups) {
          assert.equal(resolvePath(got.files, p), referenceResolve(want.files, p), p);
          assert.equal(resolvePath(new Map(got.files), p), referenceResolve(want.files, p), p);
        }
      },
    ),
    fuzzParams(5),
  );
});
