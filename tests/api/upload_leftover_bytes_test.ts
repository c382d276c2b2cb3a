// Bytes a PATCH wrote past the committed offset before its process died are never part of the
// blob: every append (a final chunk's, and the empty one of a completion without a body) first
// truncates the file to the committed offset. A final chunk's commit then skips a second
// truncate and sync (CommitOptions.synced); without a body the commit syncs the new length.
// The leftover is written straight into the fs store's upload file, as a kill mid-PATCH leaves it.
import assert from "node:assert/strict";
import { join } from "node:path";
import { withServer } from "../helpers/server.ts";
import { bytesOf, req, serverTestOpts } from "../helpers/api.ts";
import { randomBytes, sha256 } from "../helpers/bytes.ts";

for (const finalChunk of [true, false]) {
  Deno.test(
    `upload: bytes past the committed offset are not stored (completion ${
      finalChunk ? "with a final chunk" : "without a body"
    })`,
    serverTestOpts,
    async () => {
      const root = await Deno.makeTempDir({ prefix: "wharf-leftover-" });
      try {
        await withServer(
          { blobStore: `[blob_store.fs]\nroot_dir = ${JSON.stringify(root)}` },
          async (s) => {
            const a = randomBytes(1000);
            const b = finalChunk ? randomBytes(700) : new Uint8Array(0);
            const post = await req(s, "/v2/lo/app/blobs/uploads/", { method: "POST" });
            assert.equal(post.status, 202);
            await post.body?.cancel();
            const loc = new URL(post.headers.get("location")!, s.url);
            const uuid = loc.pathname.split("/").pop()!;
            const patch = await req(s, loc, {
              method: "PATCH",
              headers: { "content-type": "application/octet-stream", "content-range": "0-999" },
              body: a as BodyInit,
            });
            assert.equal(patch.status, 202);
            await patch.body?.cancel();
            // a PATCH that died after writing, before its offset was committed
            const f = await Deno.open(join(root, "uploads", uuid), { append: true });
            await f.write(randomBytes(5000));
            f.close();
            const whole = new Uint8Array([...a, ...b]);
            const digest = await sha256(whole);
            const put = new URL(loc);
            put.searchParams.set("digest", digest);
            const headers: Record<string, string> = { "content-type": "application/octet-stream" };
            if (finalChunk) headers["content-range"] = `1000-${999 + b.length}`;
            const r = await req(s, put, {
              method: "PUT",
              headers,
              body: finalChunk ? b as BodyInit : undefined,
            });
            assert.equal(r.status, 201, await r.text());
            const got = await req(s, `/v2/lo/app/blobs/${digest}`);
            assert.equal(got.status, 200);
            assert.deepEqual(await bytesOf(got), whole);
            const hex = digest.slice("sha256:".length);
            const st = await Deno.stat(join(root, "blobs", "sha256", hex.slice(0, 2), hex));
            assert.equal(st.size, whole.length, "the stored file holds the blob and nothing more");
          },
        );
      } finally {
        await Deno.remove(root, { recursive: true }).catch(() => {});
      }
    },
  );
}
