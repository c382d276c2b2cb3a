// The file index's commits under KV's strictest limits: long paths (near the 1 KiB cap) would
// overflow the 80 KiB of keys a commit may set if batched by count; forgetLayer removes exactly
// what writeFileIndex wrote.
import assert from "node:assert/strict";
import { enforceKvLimits, keySize } from "../kv/mod.ts";
import {
  fileIndexCurrent,
  forgetLayer,
  MAX_PATH,
  parseNamePattern,
  writeFileIndex,
} from "./file_search.ts";
import type { IndexRecord, LayerReader } from "./layer_store.ts";
import { fileIndexDoneKey, IndexRecords } from "./index_records.ts";

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
    entries.push({ path: "x/" + "y".repeat(4095), kind: "file", size: 1 }); // over the cap
    entries.push({ path: "etc", kind: "directory", size: 0 }); // not a file
    entries.push({ path: "bin/sh", kind: "symlink", size: 0 });
    const rec = { state: "ready" } as IndexRecord;
    const files = await writeFileIndex(new IndexRecords(kv), readerOf(entries), LAYER, rec);
    assert.deepEqual(violations, []);
    assert.equal(files, 1501);
    assert.equal(await count(kv, ["fpath"]), 1501);
    assert.equal(await count(kv, ["fname"]), 1501);
    assert.equal(await count(kv, ["fnamer"]), 1501);
    assert.equal(await count(kv, ["fsha"]), 1500);
    assert.equal((await kv.get(fileIndexDoneKey(LAYER))).value !== null, true);
    // written once: a second run is a no-op
    assert.equal(await writeFileIndex(new IndexRecords(kv), readerOf(entries), LAYER, rec), 0);

    const deleted = await forgetLayer(new IndexRecords(kv), readerOf(entries), LAYER, rec);
    assert.deepEqual(violations, []);
    assert.equal(deleted, 1501 * 3 + 1500);
    for (const p of ["fpath", "fname", "fnamer", "fsha"]) assert.equal(await count(kv, [p]), 0, p);
    assert.equal((await kv.get(fileIndexDoneKey(LAYER))).value, null);
  } finally {
    raw.close();
  }
});

Deno.test("file index: keys from NULs, long non-ASCII and long paths stay under 2 KiB; hashed parts", async () => {
  const raw = await Deno.openKv(":memory:");
  const violations: string[] = [];
  const kv = enforceKvLimits(raw, (m) => violations.push(m));
  try {
    const sha = "a".repeat(64);
    const paths = [
      "\0".repeat(1000), // KV escapes each NUL as two bytes: 2,000 in a key
      "d/" + "\0".repeat(1000),
      "é".repeat(1024), // 2 KiB of UTF-8 as one name
      "日".repeat(1365), // 4,095 bytes, just under MAX_PATH
      "\ud800".repeat(1300), // lone surrogates: written as U+FFFD, 3 bytes each
      "a/".repeat(2000) + "b", // 4,001 bytes, 2,001 segments
      "short/name",
    ];
    const entries = paths.map((path, i) => ({ path, kind: "file", size: i, sha }));
    entries.push({ path: "x".repeat(MAX_PATH + 1), kind: "file", size: 0, sha }); // not entered
    const rec = { state: "ready" } as IndexRecord;
    assert.equal(
      await writeFileIndex(new IndexRecords(kv), readerOf(entries), LAYER, rec),
      paths.length,
    );
    assert.deepEqual(violations, []);
    const all: Deno.KvEntry<{ size: number; path?: string }>[] = [];
    for (const p of ["fpath", "fname", "fnamer", "fsha"]) {
      for await (const e of kv.list<{ size: number; path?: string }>({ prefix: [p] })) all.push(e);
    }
    assert.equal(all.length, paths.length * 4);
    for (const e of all) assert.ok(keySize(e.key) <= 2048, JSON.stringify(e.key).slice(0, 80));
    // Every path can be told from its keys: the key holds it, or its value does.
    const bySha = all.filter((e) => e.key[0] === "fsha").map((e) =>
      typeof e.key[3] === "string" ? e.key[3] : e.value.path
    );
    assert.deepEqual(
      bySha.sort(),
      paths.map((p) => p.replace(/\ud800/g, "\ufffd")).sort(),
    );
    // The short one keeps version 1's layout.
    assert.notEqual((await kv.get(["fpath", "short/name", LAYER])).value, null);
    assert.notEqual((await kv.get(["fname", "name", LAYER, "short/name"])).value, null);
    assert.notEqual((await kv.get(["fnamer", "eman", LAYER, "short/name"])).value, null);
    assert.equal(
      await forgetLayer(new IndexRecords(kv), readerOf(entries), LAYER, rec),
      paths.length * 4,
    );
    for (const p of ["fpath", "fname", "fnamer", "fsha"]) assert.equal(await count(kv, [p]), 0, p);
    assert.deepEqual(violations, []);
  } finally {
    raw.close();
  }
});

Deno.test("file index: name patterns read from their longer literal end; * and ? over code points", () => {
  const p = (v: string) => parseNamePattern(v)!;
  assert.deepEqual(p("hello*").range, { prefix: "hello", reversed: false });
  assert.deepEqual(p("*.sh").range, { prefix: "hs.", reversed: true });
  assert.deepEqual(p("lib*.so.3").range, { prefix: "3.os.", reversed: true });
  assert.deepEqual(p("libssl*.so").range, { prefix: "libssl", reversed: false });
  assert.equal(parseNamePattern("*"), null);
  assert.equal(parseNamePattern("*x*"), null);
  assert.equal(parseNamePattern("?"), null);
  const cases: [string, string, boolean][] = [
    ["hello*", "hello.sh", true],
    ["hello*", "hello", true],
    ["hello*", "hell", false],
    ["*.sh", "run.sh", true],
    ["*.sh", "run.shx", false],
    ["*.sh", ".sh", true],
    ["a?c", "abc", true],
    ["a?c", "ac", false],
    ["a?c", "a日c", true], // one code point, three bytes
    ["a*b*c", "aXXbYYc", true],
    ["a*b*c", "aXXcYYb", false],
    ["a.b*", "aXb", false], // `.` is literal
    ["[x]*", "[x]y", true], // so are brackets
  ];
  for (const [pat, name, want] of cases) {
    assert.equal(p(pat).matches(name), want, `${pat} ~ ${name}`);
  }
  // linear: a pattern that backtracks badly as a regex answers at once
  const t = performance.now();
  assert.equal(p("a*a*a*a*a*a*a*a*b").matches("a".repeat(4000)), false);
  assert.ok(performance.now() - t < 2000);
});

Deno.test("file index: a layer written by an older version is not current; rewriting adds keys", async () => {
  const kv = await Deno.openKv(":memory:");
  try {
    const rec = { state: "ready" } as IndexRecord;
    const entries = [{ path: "bin/run.sh", kind: "file", size: 3 }];
    await kv.set(fileIndexDoneKey(LAYER), { version: 2, files: 1 });
    assert.equal(await fileIndexCurrent(new IndexRecords(kv), LAYER), false);
    assert.equal(await writeFileIndex(new IndexRecords(kv), readerOf(entries), LAYER, rec), 1);
    assert.equal(await fileIndexCurrent(new IndexRecords(kv), LAYER), true);
    assert.notEqual((await kv.get(["fnamer", "hs.nur", LAYER, "bin/run.sh"])).value, null);
  } finally {
    kv.close();
  }
});
