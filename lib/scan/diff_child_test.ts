// The image diff's sandbox (diff_child.ts) answers as the in-process diff does, from listings
// framed on its input or read from files it was given, the layers not fully indexed included.
import assert from "node:assert/strict";
import type { ListedEntry } from "../index/mod.ts";
import { encodeListings } from "./listing_frames.ts";
import { mergeLayers } from "./merged_fs.ts";
import { diffImages, type ImageDiff } from "./image_diff.ts";
import { runSandboxedJson } from "../sandbox/mod.ts";

const BUDGET = { wallSecs: 60, cpuSecs: 60, memoryBytes: 512 << 20 };
const DIFF_CHILD = new URL("./diff_child.ts", import.meta.url);

const e = (path: string, kind = "file", size = 1, sha256 = "a") =>
  ({ path, kind, size, mode: 0o644, offset: 0, content: { sha256 } }) as unknown as ListedEntry;

const FROM: ListedEntry[][] = [[e("etc", "dir"), e("etc/a"), e("etc/b"), e("bin/x", "file", 9)]];
const TO: ListedEntry[][] = [
  [e("etc", "dir"), e("etc/a"), e("etc/b"), e("bin/x", "file", 9)],
  [e("etc/b", "whiteout", 0), e("etc/c"), e("bin/x", "file", 10, "b")],
];
const SIDES = [
  { digest: "sha256:from", layers: ["sha256:l0"] },
  { digest: "sha256:to", layers: ["sha256:l0", "sha256:l1"] },
];

const ndjson = (es: ListedEntry[]) =>
  new TextEncoder().encode(es.map((x) => JSON.stringify(x)).join("\n") + "\n");

async function inline(limit: number): Promise<ImageDiff> {
  const merge = (g: ListedEntry[][]) =>
    mergeLayers(g.map((es) => () =>
      (async function* () {
        yield* es;
      })()
    ));
  return diffImages(
    { ...SIDES[0], merged: await merge(FROM) },
    { ...SIDES[1], merged: await merge(TO) },
    limit,
  );
}

Deno.test("diff sandbox: the same diff as in process, framed or from files", async () => {
  const want = await inline(100);
  assert.deepEqual(want.added.map((x) => x.path), ["etc/c"]);
  assert.deepEqual(want.removed.map((x) => x.path), ["etc/b"]);
  assert.deepEqual(want.modified.map((x) => x.path), ["bin/x"]);
  const framed = await runSandboxedJson<ImageDiff>({
    label: "diff",
    module: DIFF_CHILD,
    args: { listings: { counts: [1, 2] }, sides: SIDES, limit: 100 },
    stdin: ReadableStream.from(
      encodeListings(
        [FROM, TO].map((g) =>
          g.map((es) => () => Promise.resolve(ReadableStream.from([ndjson(es)])))
        ),
      ),
    ),
    budget: BUDGET,
  });
  assert.deepEqual(framed, want);
  const dir = await Deno.makeTempDir({ prefix: "wharf-diff-" });
  try {
    const paths: string[][] = [];
    for (const [g, layers] of [FROM, TO].entries()) {
      paths.push([]);
      for (const [i, es] of layers.entries()) {
        const p = `${dir}/${g}-${i}.ndjson`;
        await Deno.writeFile(p, ndjson(es));
        paths[g].push(p);
      }
    }
    const fromFiles = await runSandboxedJson<ImageDiff>({
      label: "diff",
      module: DIFF_CHILD,
      args: { listings: { counts: [1, 2], paths }, sides: SIDES, limit: 100 },
      readPaths: paths.flat(),
      budget: BUDGET,
    });
    assert.deepEqual(fromFiles, want);
    assert.equal(want.complete, true);
    // A layer not fully indexed, named on its side, comes back named: the diff is incomplete.
    const named = { digest: "sha256:l2", state: "unsupported", error: "not a tar" };
    const incomplete = await runSandboxedJson<ImageDiff>({
      label: "diff",
      module: DIFF_CHILD,
      args: {
        listings: { counts: [1, 2], paths },
        sides: [SIDES[0], { ...SIDES[1], unindexed: [named] }],
        limit: 100,
      },
      readPaths: paths.flat(),
      budget: BUDGET,
    });
    assert.deepEqual([incomplete.from.unindexed, incomplete.to.unindexed], [[], [named]]);
    assert.equal(incomplete.complete, false);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
