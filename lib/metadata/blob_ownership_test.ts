// With allow_missing_manifest_references = false a manifest may only reference blobs its
// namespace owns, and a blob delete is refused while a manifest references it. A manifest push
// and a blob delete racing each other must not both succeed; both interleavings are forced here.
import assert from "node:assert/strict";
import { RegistryError } from "../oci/errors.ts";
import { K } from "../kv/mod.ts";
import { BlobMeta, ManifestMeta, type ManifestWrite, NO_FACTS } from "./mod.ts";
import { openTestKv, racingKv } from "../../tests/helpers/kv.ts";

const NS = "race/ns";
const BLOB = `sha256:${"b".repeat(64)}`;
const CONFIG = `sha256:${"c".repeat(64)}`;
const MANIFEST = `sha256:${"d".repeat(64)}`;

async function withKv(
  fn: (kv: Deno.Kv, blobs: BlobMeta, manifests: ManifestMeta) => Promise<void>,
) {
  const t = await openTestKv();
  const kv = t.kv;
  try {
    const blobs = new BlobMeta(kv);
    for (const d of [BLOB, CONFIG]) {
      const reserved = await blobs.reserve(d, 10);
      await blobs.addLink(NS, d, 10, reserved, () => Promise.resolve(true), NO_FACTS);
    }
    await fn(kv, blobs, new ManifestMeta(kv));
    assert.deepEqual(t.violations, []);
  } finally {
    await t.close();
  }
}

function write(): ManifestWrite {
  return {
    ns: NS,
    digest: MANIFEST,
    record: { mediaType: "application/vnd.oci.image.manifest.v1+json", size: 100, pushedAt: 1 },
    parsed: {
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      blobs: [CONFIG, BLOB],
      layers: [{ digest: BLOB, mediaType: "application/vnd.oci.image.layer.v1.tar+gzip" }],
      children: [],
    },
    tags: ["t"],
    tagCreatedAt: 1,
    guard: () => {},
    reserved: null,
    placed: () => Promise.resolve(true),
    requireBlobs: true,
  };
}

Deno.test("a blob delete landing after the manifest read its links fails the manifest push", async () => {
  await withKv(async (kv, blobs) => {
    // The delete lands between the manifest's reads and its first commit.
    const racing = racingKv(kv, (n) => n === 1 ? blobs.unlink(NS, BLOB, NO_FACTS) : undefined).kv;
    await assert.rejects(
      new ManifestMeta(racing).commit(write(), NO_FACTS),
      (e) => e instanceof RegistryError && e.code === "MANIFEST_BLOB_UNKNOWN",
    );
    assert.equal((await kv.get(K.rev(NS, MANIFEST))).value, null, "no revision was written");
    assert.equal((await kv.get(K.tag(NS, "t"))).value, null, "no tag was written");
  });
});

Deno.test("a manifest push landing after a blob delete scanned for references fails the delete", async () => {
  await withKv(async (kv, blobs, manifests) => {
    // What unlink read before its commit: the link, refver, and no references yet.
    const seen = await kv.get(K.link(NS, BLOB));
    const refver = await kv.get(K.refver(NS));
    assert.equal(
      await Array.fromAsync(kv.list({ prefix: K.brefs(NS, BLOB) })).then((l) => l.length),
      0,
    );
    await manifests.commit(write(), NO_FACTS);
    // The link itself is untouched (a check on it alone would pass) …
    assert.equal((await kv.get(K.link(NS, BLOB))).versionstamp, seen.versionstamp);
    // … but the manifest commit rewrote refver, so unlink's guarded delete cannot go through…
    const stale = await kv.atomic().check(seen).check(refver).delete(K.link(NS, BLOB)).commit();
    assert.equal(stale.ok, false);
    // …and unlink, retrying, finds the reference and refuses.
    await assert.rejects(
      blobs.unlink(NS, BLOB, NO_FACTS),
      (e) => e instanceof RegistryError && e.code === "DENIED" && e.status === 405,
    );
    assert.ok((await kv.get(K.link(NS, BLOB))).value, "the namespace still owns the blob");
  });
});
