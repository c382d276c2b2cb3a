import assert from "node:assert/strict";
import type { ListedEntry } from "../index/mod.ts";
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
