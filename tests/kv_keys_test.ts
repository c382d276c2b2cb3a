// lib/kv/keys.ts is the KV layout's map only if no key is built anywhere else. Two nets:
// a static scan of the code for key-shaped array literals outside keys.ts, and the guard every
// strict KV (the servers under test) runs under, which refuses a key keys.ts does not list.
import assert from "node:assert/strict";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import {
  enforceListedKeys,
  FILE_INDEX_PREFIX,
  K,
  KEY_PREFIXES,
  strictIfRequested,
  UnlistedKeyError,
} from "../lib/kv/mod.ts";

const ROOT = fileURLToPath(new URL("../", import.meta.url));
/** Where Wharf's own code lives (tests build raw keys on purpose, and are not scanned). */
const SOURCES = ["lib", "routes", "commands", "deploy"];

async function* tsFiles(dir: string): AsyncGenerator<string> {
  const entries = await Array.fromAsync(Deno.readDir(dir)).catch(() => []);
  for (const e of entries) {
    const path = join(dir, e.name);
    if (e.isDirectory) yield* tsFiles(path);
    else if (e.isFile && e.name.endsWith(".ts")) yield path;
  }
}

/** Source without comments, so a layout drawn in a comment is not a key. */
function code(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`\\])\/\/.*$/gm, "$1");
}

// An array literal that opens with a string literal: `["scanrep", digest]`, `["osvmeta"]`.
const STRING_LED = /\[\s*(["'])([^"'\n]*)\1\s*[,\]]/g;
// Where an array literal is a KV key: an argument of a KV call, a selector or check field, or a
// value typed or returned as one.
const KEY_PLACE =
  /(\.(get|getMany|set|delete|list|check|sum|min|max|watch)(<[^>]*>)?\(\s*|\b(prefix|start|end|key)\s*:\s*|Deno\.KvKey(\[\])?\s*=>?\s*)$/;

// A bracket right after a name, a call or a type is an index (`PullBlobs["blob"]`), not a literal.
const INDEXING = /[\w\])>]$/;

/** `file:line: literal` for every key-shaped literal of Wharf's code outside keys.ts. */
async function keysBuiltOutside(): Promise<{ found: string[]; scanned: number }> {
  const found: string[] = [];
  let scanned = 0;
  const files = SOURCES.map((d) => tsFiles(join(ROOT, d)));
  for (const path of [join(ROOT, "main.ts"), ...(await Promise.all(files.map(collect))).flat()]) {
    const rel = relative(ROOT, path);
    if (rel === "lib/kv/keys.ts" || /_test\.ts$/.test(rel)) continue;
    scanned++;
    const src = code(await Deno.readTextFile(path));
    for (const m of src.matchAll(STRING_LED)) {
      const before = src.slice(Math.max(0, m.index - 80), m.index);
      if (INDEXING.test(before)) continue;
      if (KEY_PREFIXES.has(m[2]) || KEY_PLACE.test(before)) {
        const line = src.slice(0, m.index).split("\n").length;
        found.push(`${rel}:${line}: ${m[0]}`);
      }
    }
  }
  return { found, scanned };
}

const collect = (it: AsyncGenerator<string>) => Array.fromAsync(it);

Deno.test("no module builds a KV key outside lib/kv/keys.ts", async () => {
  const { found, scanned } = await keysBuiltOutside();
  assert.ok(scanned > 200, `scanned only ${scanned} files`);
  assert.deepEqual(found, []);
});

Deno.test("the static scan sees a key built in a module", () => {
  const src = code(`
    // ["tag", ns] in a comment is not a key
    const a = kv.get(["newthing", id]);
    const b = { prefix: ["other"], end };
    const c = ["scanrep", digest];
    const d = ["pointer", "i32"];
    type E = Parameters<PullBlobs["blob"]>;
    const f = record["body"];
  `);
  const hits = [...src.matchAll(STRING_LED)].filter((m) => {
    const before = src.slice(Math.max(0, m.index - 80), m.index);
    return !INDEXING.test(before) && (KEY_PREFIXES.has(m[2]) || KEY_PLACE.test(before));
  }).map((m) => m[2]);
  assert.deepEqual(hits, ["newthing", "other", "scanrep"]);
});

/** Calls every builder of K with placeholder arguments. */
function everyKey(): [string, Deno.KvKey][] {
  return Object.entries(K).map(([name, f]) => {
    const args = name === "fileIndex" ? ["path", "x", "y"] : [
      "a",
      "b",
      "c",
      "d",
    ].map((s, i) => (name.startsWith("pull") || name.startsWith("sync")) && i === 2 ? 1 : s);
    return [name, (f as (...a: unknown[]) => Deno.KvKey)(...args)];
  });
}

Deno.test("KEY_PREFIXES lists the first part of every key keys.ts builds, and only those", () => {
  const heads = new Set(everyKey().map(([, k]) => k[0] as string));
  for (const family of Object.values(FILE_INDEX_PREFIX)) heads.add(family);
  assert.deepEqual([...heads].sort(), [...KEY_PREFIXES].sort());
});

Deno.test("the keys that moved into keys.ts are byte for byte the ones written before", () => {
  // What the modules wrote before keys.ts held them: data written then is read now.
  assert.deepEqual(K.jobPending("cache", "sk"), ["job", "cache", "q", "sk"]);
  assert.deepEqual(K.jobsPending("cache"), ["job", "cache", "q"]);
  assert.deepEqual(K.jobFailed("scan", "sk"), ["job", "scan", "f", "sk"]);
  assert.deepEqual(K.jobsFailed("scan"), ["job", "scan", "f"]);
  assert.deepEqual(K.jobLock("index", "lk"), ["job", "index", "lock", "lk"]);
  assert.deepEqual(K.outbox("hook", "sk"), ["evq", "hook", "sk"]);
  assert.deepEqual(K.outboxOf("hook"), ["evq", "hook"]);
  assert.deepEqual(K.outboxLease("hook"), ["evlease", "hook"]);
  assert.deepEqual(K.layerIndex("sha256:x"), ["layeridx", "sha256:x"]);
  assert.deepEqual(K.fileIndexDone("sha256:x"), ["fidxdone", "sha256:x"]);
  const bytes = new Uint8Array([0, 1]);
  assert.deepEqual(K.fileIndex("sha256", "d", "l", "/p"), ["fsha", "d", "l", "/p"]);
  assert.deepEqual(K.fileIndex("path", bytes, "l"), ["fpath", bytes, "l"]);
  assert.deepEqual(K.fileIndex("name", "n", "l", bytes), ["fname", "n", "l", bytes]);
  assert.deepEqual(K.fileIndex("reversedName", "n"), ["fnamer", "n"]);
  assert.deepEqual(K.scanReport("sha256:x"), ["scanrep", "sha256:x"]);
  assert.deepEqual(K.scanReportsAll(), ["scanrep"]);
  assert.deepEqual(K.advisoryMeta(), ["osvmeta"]);
  assert.deepEqual(K.advisorySnapshot("s"), ["osv", "s"]);
  assert.deepEqual(K.advisoriesOf("s", "npm", "left-pad"), ["osv", "s", "npm", "left-pad"]);
});

async function withKv(fn: (kv: Deno.Kv, raw: Deno.Kv) => Promise<void>): Promise<void> {
  const raw = await Deno.openKv(":memory:");
  try {
    await fn(raw, raw);
  } finally {
    raw.close();
  }
}

Deno.test("the key guard refuses every access to a key keys.ts does not list", () =>
  withKv(async (raw) => {
    const seen: string[] = [];
    const kv = enforceListedKeys(raw, (m) => seen.push(m));
    const stray: Deno.KvKey = ["stray", "x"];
    await assert.rejects(kv.get(stray), UnlistedKeyError);
    await assert.rejects(kv.getMany([K.blob("d"), stray]), UnlistedKeyError);
    await assert.rejects(kv.set(stray, 1), UnlistedKeyError);
    await assert.rejects(kv.delete(stray), UnlistedKeyError);
    assert.throws(() => kv.list({ prefix: stray }), UnlistedKeyError);
    assert.throws(() => kv.list({ start: K.blob("a"), end: stray }), UnlistedKeyError);
    assert.throws(() => kv.watch([stray]), UnlistedKeyError);
    assert.throws(() => kv.atomic().check({ key: stray, versionstamp: null }), UnlistedKeyError);
    assert.throws(() => kv.atomic().set(stray, 1), UnlistedKeyError);
    assert.throws(() => kv.atomic().delete(stray), UnlistedKeyError);
    assert.throws(() => kv.atomic().sum(stray, 1n), UnlistedKeyError);
    assert.throws(() => kv.atomic().mutate({ type: "delete", key: stray }), UnlistedKeyError);
    assert.equal(seen.length, 12);
    assert.match(seen[0], /outside lib\/kv\/keys\.ts: "stray"/);
    // Nothing reached the KV.
    assert.equal((await raw.get(stray)).versionstamp, null);
  }));

Deno.test("the key guard lets every key keys.ts builds through, and the whole-KV listing", () =>
  withKv(async (raw) => {
    const seen: string[] = [];
    const kv = enforceListedKeys(raw, (m) => seen.push(m));
    const op = kv.atomic();
    for (const [, key] of everyKey()) op.check({ key, versionstamp: null });
    for (const [, key] of everyKey().slice(0, 5)) op.set(key, 1);
    assert.equal((await op.commit()).ok, true);
    assert.equal((await kv.get(everyKey()[0][1])).value, 1);
    let n = 0;
    for await (const _ of kv.list({ prefix: [] })) n++;
    assert.equal(n, 5);
    assert.deepEqual(seen, []);
  }));

Deno.test("strict mode (WHARF_STRICT_KV_LIMITS=1) guards keys as well as limits", () =>
  withKv(async (raw) => {
    const before = Deno.env.get("WHARF_STRICT_KV_LIMITS");
    Deno.env.set("WHARF_STRICT_KV_LIMITS", "1");
    const error = console.error;
    const printed: string[] = [];
    console.error = (m: string) => printed.push(m);
    try {
      const kv = strictIfRequested(raw);
      await kv.set(K.ns("a"), { at: 1 });
      await assert.rejects(kv.get(["stray"]), UnlistedKeyError);
      assert.equal(printed.length, 1);
      assert.match(printed[0], /^KV LIMIT VIOLATION: key outside lib\/kv\/keys\.ts/);
    } finally {
      console.error = error;
      if (before === undefined) Deno.env.delete("WHARF_STRICT_KV_LIMITS");
      else Deno.env.set("WHARF_STRICT_KV_LIMITS", before);
    }
  }));
