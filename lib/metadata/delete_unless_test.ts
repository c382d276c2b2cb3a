// A revision delete that names an entry (`unlessChanged`: the cache cap's pull stamp) does not
// land after a write to that entry: the eviction's judgment and its delete are one check.
import assert from "node:assert/strict";
import { openTestKv } from "../../tests/helpers/kv.ts";
import { K } from "../kv/mod.ts";
import { ManifestMeta, type ManifestWrite, NO_FACTS } from "./mod.ts";

const NS = "evict/ns";
const DIGEST = `sha256:${"a".repeat(64)}`;

const write: ManifestWrite = {
  ns: NS,
  digest: DIGEST,
  record: { mediaType: "application/vnd.oci.image.manifest.v1+json", size: 10, pushedAt: 1 },
  parsed: {
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    blobs: [],
    layers: [],
    children: [],
  },
  tags: ["latest"],
  tagCreatedAt: 1,
  guard: () => {},
  reserved: null,
  placed: () => Promise.resolve(true),
};

class InUse extends Error {}

Deno.test("a delete guarded by an entry stops when the entry is written before its commit", async () => {
  const t = await openTestKv();
  try {
    const meta = new ManifestMeta(t.kv);
    await meta.commit(write, NO_FACTS);
    const stamp = K.lastPull(NS, DIGEST);
    await t.kv.set(stamp, new Deno.KvU64(1n));
    let reads = 0;
    await assert.rejects(
      meta.deleteRevision({
        ns: NS,
        digest: DIGEST,
        parsed: write.parsed,
        guard: () => {},
        fx: NO_FACTS,
        unlessChanged: async () => {
          const e = await t.kv.get<Deno.KvU64>(stamp);
          if (e.value!.value > 1n) throw new InUse();
          reads++;
          // A pull lands between this read and the delete's commit.
          await t.kv.set(stamp, new Deno.KvU64(2n));
          return e;
        },
      }),
      InUse,
    );
    assert.equal(reads, 1);
    assert.equal((await meta.revision(NS, DIGEST))?.size, 10, "the revision stays");
    assert.equal((await meta.tag(NS, "latest"))?.digest, DIGEST, "its tag stays");
  } finally {
    await t.close();
  }
});

Deno.test("a delete guarded by an unchanged entry goes through", async () => {
  const t = await openTestKv();
  try {
    const meta = new ManifestMeta(t.kv);
    await meta.commit(write, NO_FACTS);
    const stamp = K.lastPull(NS, DIGEST);
    await meta.deleteRevision({
      ns: NS,
      digest: DIGEST,
      parsed: write.parsed,
      guard: () => {},
      fx: NO_FACTS,
      unlessChanged: () => t.kv.get(stamp),
    });
    assert.equal(await meta.revision(NS, DIGEST), null);
    assert.equal(await meta.tag(NS, "latest"), null);
  } finally {
    await t.close();
  }
});
