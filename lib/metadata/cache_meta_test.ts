// The cache cap's lease reads and writes (issue 26 part 2): which images a blob belongs to (the
// manifests referencing it and the indexes over those, bounded), stamps in batches within the
// KV limits, and a stamp read back.
import assert from "node:assert/strict";
import { K } from "../kv/mod.ts";
import { CacheMeta } from "./mod.ts";
import { openTestKv } from "../../tests/helpers/kv.ts";

const NS = "hub/x";
const d = (c: string, i = 0) => `sha256:${c.repeat(60)}${String(i).padStart(4, "0")}`;

Deno.test("cache meta: a blob's images are its manifests and the indexes over them, bounded", async () => {
  const t = await openTestKv();
  try {
    const meta = new CacheMeta(t.kv);
    const blob = d("b");
    await t.kv.atomic()
      .set(K.bref(NS, blob, d("m", 1)), true)
      .set(K.bref(NS, blob, d("m", 2)), true)
      .set(K.mref(NS, d("m", 1), d("i", 1)), null)
      .set(K.bref("hub/other", blob, d("m", 3)), true) // another namespace's: not this one's
      .commit();
    assert.deepEqual(
      (await meta.imagesOf(NS, blob)).sort(),
      [d("i", 1), d("m", 1), d("m", 2)].sort(),
    );
    assert.deepEqual(await meta.imagesOf(NS, d("c")), []);
    // Many references: at most `limit` images, however many the namespace holds.
    const many = t.kv.atomic();
    for (let i = 0; i < 30; i++) many.set(K.bref(NS, d("e"), d("m", 100 + i)), true);
    for (let i = 0; i < 30; i++) many.set(K.mref(NS, d("m", 100), d("i", 100 + i)), null);
    await many.commit();
    assert.equal((await meta.imagesOf(NS, d("e"), 10)).length, 10);
    assert.equal((await meta.imagesOf(NS, d("e"), 40)).length, 40);
    assert.deepEqual(t.violations, []);
  } finally {
    await t.close();
  }
});

Deno.test("cache meta: touchAll stamps every image, newest wins, within the KV limits", async () => {
  const t = await openTestKv();
  try {
    const meta = new CacheMeta(t.kv);
    const images = Array.from({ length: 250 }, (_, i) => d("m", i));
    const future = Date.now() + 3_600_000;
    await t.kv.set(K.lastPull(NS, images[0]), new Deno.KvU64(BigInt(future)));
    assert.equal(await meta.stamp(NS, images[1]), null);
    const before = Date.now();
    await meta.touchAll(NS, images);
    assert.equal(await meta.stamp(NS, images[0]), future, "a newer stamp is kept");
    for (const m of images.slice(1)) {
      const s = await meta.stamp(NS, m);
      assert.ok(s !== null && s >= before && s <= Date.now(), `${m} stamped`);
    }
    assert.deepEqual(t.violations, []);
  } finally {
    await t.close();
  }
});
