// `verify` against a Wharf whose bytes are in a real S3 server: an object whose bytes changed
// under its key is reported and quarantined (copied aside, its key deleted), answers BLOB_UNKNOWN,
// and a re-push of the same digest (same size: the store must not skip it as already held)
// stores the right bytes again.
import assert from "node:assert/strict";
import { assertErrorCode, bytesOf, req, serverTestOpts } from "../helpers/api.ts";
import { startS3 } from "../helpers/s3_server.ts";
import { pushBlob, runCli, s3Toml, withServer } from "../helpers/server.ts";
import { S3Client } from "../../lib/storage/mod.ts";

Deno.test({
  name: "s3: a blob whose object rotted is quarantined by verify and restored by a re-push",
  ...serverTestOpts,
  async fn() {
    const s3 = await startS3();
    const prefix = "verify";
    try {
      await withServer({
        blobStore: s3Toml(s3.endpoint, prefix),
        // inline GET answers (no 307 to S3), no indexing of random bytes
        config: `[global]\nenable_blob_redirect = false\n[global.index]\non_push = "none"\n`,
      }, async (s) => {
        const big = new Uint8Array(400_000);
        for (let i = 0; i < big.length; i += 65536) {
          crypto.getRandomValues(big.subarray(i, i + 65536));
        }
        const d = await pushBlob(s.url, "team/s3", big);
        const client = new S3Client({
          endpoint: s3.endpoint,
          bucket: s3.bucket,
          region: "us-east-1",
          accessKeyId: s3.accessKeyId,
          secretKey: s3.secretKey,
          pathStyle: true,
        });
        const [alg, hex] = d.split(":");
        const key = `${prefix}/blobs/${alg}/${hex.slice(0, 2)}/${hex}`;
        const rotten = big.slice();
        rotten[200_000] ^= 0x5a;
        await client.put(key, rotten);

        const v = await runCli(s, "verify", ["--rate", "0"]);
        assert.equal(v.code, 3, v.stdout + v.stderr);
        assert.match(
          v.stdout,
          new RegExp(
            `corrupt ${d} \\(400000 bytes hash to sha256:[0-9a-f]{64}\\): quarantined \\(bytes kept aside\\)`,
          ),
        );
        assert.equal(await client.head(key), null, "the key is gone");
        assert.equal((await client.head(`${prefix}/quarantine/${alg}/${hex}`))?.size, 400_000);
        const e = await assertErrorCode(
          await req(s, `/v2/team/s3/blobs/${d}`),
          404,
          "BLOB_UNKNOWN",
        );
        assert.match(String(e.detail), /was quarantined at .*push it again/);

        await pushBlob(s.url, "team/s3", big);
        const r = await req(s, `/v2/team/s3/blobs/${d}`);
        assert.equal(r.status, 200);
        assert.deepEqual(await bytesOf(r), big);
        const again = await runCli(s, "verify", ["--rate", "0"]);
        assert.equal(again.code, 0, again.stdout + again.stderr);
        assert.match(again.stdout, /1 restored; 0 quarantined now; pass complete/);
      });
    } finally {
      await s3.close();
    }
  },
});
