// Rule 5 of X-Svc-Source-Timestamp (a local tag with no recorded creation time is oldest) needs
// a tag record no API call writes, so it is tested here on a real KV file.
import { openTestKv } from "../../tests/helpers/kv.ts";
import assert from "node:assert/strict";
import { buildConfig } from "../config/mod.ts";
import { FsBlobStore } from "../storage/mod.ts";
import { K } from "../kv/mod.ts";
import { Registry } from "./mod.ts";
import { allWriteEffects } from "../services/mod.ts";

const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
const index = (n: number) =>
  enc({
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.index.v1+json",
    manifests: [],
    annotations: { n: String(n) },
  });

async function put(reg: Registry, ns: string, ref: string, body: Uint8Array, ts: string | null) {
  return await reg.manifests.put(ns, ref, {
    body: ReadableStream.from([body]),
    contentLength: body.byteLength,
    contentType: "application/vnd.oci.image.index.v1+json",
    tags: [],
    sourceTimestamp: ts,
  });
}

Deno.test("a tag without a recorded creation time never blocks a replicated write", async () => {
  const dir = await Deno.makeTempDir();
  const t = await openTestKv(`${dir}/kv`);
  const kv = t.kv;
  const store = new FsBlobStore(`${dir}/blobs`);
  await store.init();
  const cfg = buildConfig({}, []);
  const reg = new Registry(cfg, kv, store, { effects: allWriteEffects(cfg) });
  try {
    const first = await put(reg, "a", "t", index(1), null);
    // The record as an older writer (or an import) left it: no createdAt.
    await kv.set(K.tag("a", "t"), { digest: first.digest });
    const old = "2001-01-01T00:00:00Z";
    const second = await put(reg, "a", "t", index(2), old);
    assert.notEqual(second.digest, first.digest);
    const rec = (await kv.get<{ digest: string; createdAt: number }>(K.tag("a", "t"))).value!;
    assert.equal(rec.digest, second.digest);
    assert.equal(rec.createdAt, Date.parse(old), "a backdated timestamp is persisted verbatim");
    // …and now that a time is recorded, an even older event loses.
    await assert.rejects(put(reg, "a", "t", index(3), "2000-01-01T00:00:00Z"), /superseded/i);
    assert.deepEqual(t.violations, []);
  } finally {
    await t.close();
    await Deno.remove(dir, { recursive: true });
  }
});
