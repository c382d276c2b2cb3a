// The file index's commits under KV's strictest limits: long paths (near the 1 KiB cap) would
// overflow the 80 KiB of keys a commit may set if batched by count; forgetLayer removes exactly
// what writeFileIndex wrote.
import assert from "node:assert/strict";
import { enforceKvLimits } from "../metadata/kv_limits.ts";
import { fileIndexDoneKey, forgetLayer, writeFileIndex } from "./file_search.ts";
import type { IndexRecord, LayerReader } from "./layer_store.ts";

const LAYER = "sha256:" + "c".repeat(64);

function readerOf(entries: { path: string; kind: string; size: number; sha?: string }[]) {
  return {
    async *entries() {
      for (const e of entries) {
        yield { ...e, content: e.sha ? { sha256: e.sha } : undefined };
      }
    },
  } as unknown as LayerReader;
}

async function count(kv: Deno.Kv, prefix: Deno.KvKey): Promise<number> {
  let n = 0;
  for await (const _ of kv.list({ prefix })) n++;
  return n;
}

Deno.test("file index: long paths stay inside KV's per-commit limits; forgetLayer undoes it", async () => {
  const raw = await Deno.openKv(":memory:");
  const violations: string[] = [];
  const kv = enforceKvLimits(raw, (m) => violations.push(m));
  try {
    const dir = "d".repeat(480);
    const entries = [];
    for (let i = 0; i < 1500; i++) {
      // ~1,000-byte paths with a long basename too: every key is near its largest
      const path = `${dir}/${String(i).padStart(6, "0")}${"n".repeat(500)}`;
      entries.push({ path, kind: "file", size: i, sha: i.toString(16).padStart(64, "0") });
    }
    entries.push({ path: "x/" + "y".repeat(1100), kind: "file", size: 1 }); // over the cap
    entries.push({ path: "etc", kind: "directory", size: 0 }); // not a file
    entries.push({ path: "bin/sh", kind: "symlink", size: 0 });
    const rec = { state: "ready" } as IndexRecord;
    const files = await writeFileIndex(kv, readerOf(entries), LAYER, rec);
    assert.deepEqual(violations, []);
    assert.equal(files, 1501);
    assert.equal(await count(kv, ["fpath"]), 1501);
    assert.equal(await count(kv, ["fname"]), 1501);
    assert.equal(await count(kv, ["fsha"]), 1500);
    assert.equal((await kv.get(fileIndexDoneKey(LAYER))).value !== null, true);
    // written once: a second run is a no-op
    assert.equal(await writeFileIndex(kv, readerOf(entries), LAYER, rec), 0);

    const deleted = await forgetLayer(kv, readerOf(entries), LAYER, rec);
    assert.deepEqual(violations, []);
    assert.equal(deleted, 1501 * 2 + 1500);
    for (const p of ["fpath", "fname", "fsha"]) assert.equal(await count(kv, [p]), 0, p);
    assert.equal((await kv.get(fileIndexDoneKey(LAYER))).value, null);
  } finally {
    raw.close();
  }
});
