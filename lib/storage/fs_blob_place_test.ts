// FsBlobStore remembers blob directories it has made durable and skips their mkdir and parent
// sync; a directory removed behind its back must still be made again, not fail the push.
import assert from "node:assert/strict";
import { join } from "node:path";
import { FsBlobStore } from "./fs_blob_store.ts";

const A = `sha256:ab${"1".repeat(62)}`;
const B = `sha256:ab${"2".repeat(62)}`;

Deno.test("a blob directory removed after a placement is made again for the next one", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const store = new FsBlobStore(dir);
    await store.init();
    await store.appendUpload("u1", 0, new Blob([new Uint8Array([1, 2, 3])]).stream(), {
      maxBytes: 3,
      onChunk: () => {},
    });
    await store.commitUpload("u1", A, 3);
    assert.ok(await store.exists(A));
    await Deno.remove(join(dir, "blobs", "sha256", "ab"), { recursive: true });
    await store.appendUpload("u2", 0, new Blob([new Uint8Array([4, 5])]).stream(), {
      maxBytes: 2,
      onChunk: () => {},
    });
    await store.commitUpload("u2", B, 2);
    assert.deepEqual(await store.readAll(B), new Uint8Array([4, 5]));
    // And once more into the directory now remembered.
    await store.put(A, new Uint8Array([9]));
    assert.deepEqual(await store.readAll(A), new Uint8Array([9]));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
