// The single fast pull of a large blob (>= 32 MiB) reads into a ring of reused buffers
// (lib/storage/fs_read.ts): a buffer must never be overwritten while the HTTP layer still
// holds its bytes. Slow, jittery readers make the server's writes back up, which is when that
// would show.
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";
import { pushBlob, withServer } from "../helpers/server.ts";
import { serverTestOpts } from "../helpers/api.ts";

function randomBytes(size: number): Uint8Array {
  const data = new Uint8Array(size);
  for (let o = 0; o < size; o += 65536) {
    crypto.getRandomValues(data.subarray(o, Math.min(size, o + 65536)));
  }
  return data;
}

Deno.test({
  name: "blob pulls: slow concurrent readers get every byte intact",
  ...serverTestOpts,
  async fn() {
    await withServer({}, async (s) => {
      const blobs: string[] = [];
      const large = randomBytes((40 << 20) + 3);
      for (const data of [large, randomBytes((33 << 20) + 12345), randomBytes((3 << 20) + 7)]) {
        blobs.push(await pushBlob(s.url, "integrity/x", data));
      }
      // A range of a large blob takes the ring too, from a seeked offset.
      const start = (5 << 20) + 17, end = (37 << 20) + 5;
      const ranged = await fetch(`${s.url}/v2/integrity/x/blobs/${blobs[0]}`, {
        headers: { range: `bytes=${start}-${end}` },
      });
      assert.equal(ranged.status, 206);
      const got = new Uint8Array(await ranged.arrayBuffer());
      assert.equal(got.byteLength, end - start + 1);
      assert.ok(Buffer.from(got).equals(Buffer.from(large.subarray(start, end + 1))));
      let checked = 0;
      await Promise.all(Array.from({ length: 6 }, async (_, w) => {
        for (let k = 0; k < 3; k++) {
          const digest = blobs[(w + k) % blobs.length];
          const r = await fetch(`${s.url}/v2/integrity/x/blobs/${digest}`);
          assert.equal(r.status, 200);
          const h = createHash("sha256");
          const reader = r.body!.getReader();
          for (;;) {
            const x = await reader.read();
            if (x.done) break;
            h.update(x.value);
            if (Math.random() < 0.3) await new Promise((res) => setTimeout(res, 3));
          }
          assert.equal(`sha256:${h.digest("hex")}`, digest);
          checked++;
        }
      }));
      assert.equal(checked, 18);
    });
  },
});
