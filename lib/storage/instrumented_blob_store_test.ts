import assert from "node:assert/strict";
import { FsBlobStore, InstrumentedBlobStore } from "./mod.ts";

Deno.test("InstrumentedBlobStore times operations, errors included, streams untouched", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const inner = new FsBlobStore(dir);
    await inner.init();
    const seen: string[] = [];
    const store = new InstrumentedBlobStore(inner, (op, s) => {
      assert.ok(s >= 0);
      seen.push(op);
    });
    const data = new TextEncoder().encode("hello");
    const d = "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824";
    await store.put(d, data);
    assert.ok(await store.exists(d));
    assert.equal(await new Response(await store.read(d)).text(), "hello");
    assert.deepEqual(await store.readAll(d), data);
    const names: string[] = [];
    for await (const o of store.listBlobs()) names.push(o.name);
    assert.deepEqual(names, [d]);
    await assert.rejects(store.readAll("sha256:" + "0".repeat(64)));
    assert.deepEqual(seen, ["put", "exists", "read", "readAll", "listBlobs", "readAll"]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
