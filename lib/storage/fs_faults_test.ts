// The fs store on a full filesystem (a 4 MiB tmpfs): a failed write is a 503 naming the store and
// the cause, and leaves nothing of itself behind; the store works again once space returns.
import assert from "node:assert/strict";
import { join } from "node:path";
import { RegistryError } from "../oci/mod.ts";
import { FsBlobStore } from "./fs_blob_store.ts";
import { ignoreWithoutSmallFs, mountSmallFs } from "../../tests/helpers/small_fs.ts";

const KIB = 1024;

function bytes(n: number, seed: number): Uint8Array {
  return new Uint8Array(n).map((_, i) => (i * seed + (i >> 10)) & 0xff);
}

const append = (store: FsBlobStore, uuid: string, offset: number, data: Uint8Array) =>
  store.appendUpload(uuid, offset, ReadableStream.from([data]), {
    maxBytes: data.length,
    onChunk: () => {},
  });

function isFull(root: string) {
  return (e: unknown) =>
    e instanceof RegistryError && e.status === 503 && e.code === "PROVIDER_UNAVAILABLE" &&
    e.detail === `the blob store (${root}) is full (no space left on device): retry later` &&
    e.headers["Retry-After"] === "30";
}

async function uploads(root: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for await (const e of Deno.readDir(join(root, "uploads"))) {
    out.set(e.name, (await Deno.stat(join(root, "uploads", e.name))).size);
  }
  return out;
}

Deno.test({
  name: "fs store, disk full: 503 with the cause; a failed append's bytes and a failed put's " +
    "temporary go; the session's committed bytes stay and it completes once space returns",
  ignore: ignoreWithoutSmallFs("the fs store's disk-full test"),
  async fn() {
    const fs = await mountSmallFs(4 * KIB * KIB);
    try {
      const root = join(fs.dir, "store");
      const store = new FsBlobStore(root);
      await store.init();
      const first = bytes(512 * KIB, 7);
      const rest = bytes(1024 * KIB, 11);
      assert.equal((await append(store, "s1", 0, first)).written, first.length);

      await fs.fill();
      await assert.rejects(append(store, "s1", first.length, rest), isFull(root));
      await assert.rejects(append(store, "s2", 0, rest), isFull(root));
      await assert.rejects(store.put(`sha256:${"a".repeat(64)}`, rest), isFull(root));
      // Only the session's acknowledged bytes are left: no partial append, no temporary.
      assert.deepEqual([...(await uploads(root))], [["s1", first.length]]);

      await fs.drain();
      assert.equal((await append(store, "s1", first.length, rest)).written, rest.length);
      const digest = `sha256:${"b".repeat(64)}`;
      await store.commitUpload("s1", digest, first.length + rest.length, { synced: true });
      const got = await store.readAll(digest);
      assert.deepEqual(got.subarray(0, first.length), first);
      assert.deepEqual(got.subarray(first.length), rest);
    } finally {
      await fs.close();
    }
  },
});
