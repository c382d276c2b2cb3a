import assert from "node:assert/strict";
import { instrumentKv } from "./instrumented_kv.ts";

async function withKv(fn: (kv: Deno.Kv) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir();
  const kv = await Deno.openKv(`${dir}/kv`);
  try {
    await fn(kv);
  } finally {
    kv.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("instrumentKv times each operation and passes everything through", async () => {
  await withKv(async (raw) => {
    const seen: string[] = [];
    const kv = instrumentKv(raw, (op, s) => {
      assert.ok(s >= 0 && s < 5);
      seen.push(op);
    });
    assert.ok(kv instanceof Deno.Kv);
    await kv.set(["a", 1], "x");
    assert.equal((await kv.get(["a", 1])).value, "x");
    assert.equal((await kv.getMany([["a", 1], ["a", 2]]))[1].value, null);
    // chained atomic: the commit at the end of the chain is the timed one
    const r = await kv.atomic().check({ key: ["a", 2], versionstamp: null }).set(["a", 2], "y")
      .commit();
    assert.ok(r.ok);
    await kv.delete(["a", 1]);
    assert.deepEqual(seen, ["set", "get", "getMany", "commit", "delete"]);

    seen.length = 0;
    for (let i = 0; i < 5; i++) await raw.set(["l", i], i);
    const it = kv.list<number>({ prefix: ["l"] }, { batchSize: 2 });
    const got: number[] = [];
    for await (const e of it) got.push(e.value);
    assert.deepEqual(got, [0, 1, 2, 3, 4]);
    assert.equal(typeof it.cursor, "string");
    assert.deepEqual(seen, ["list"], "observed once, at exhaustion");

    seen.length = 0;
    for await (const _ of kv.list({ prefix: ["l"] })) break;
    assert.deepEqual(seen, ["list"], "observed when closed early");

    // pass-through with the real object's private state
    const w = kv.watch([["a", 2]]);
    const reader = w.getReader();
    assert.equal((await reader.read()).value?.[0].value, "y");
    await reader.cancel();
  });
});
