// Verified before visible through a pull-through cache of Debian's docker-registry (CNCF
// distribution 2.8, no referrers API): the upstream's cosign `.sig` tag comes with a signed image
// and releases it; an unsigned one is refused with DENIED naming what is missing.
import assert from "node:assert/strict";
import { assertErrorCode, req } from "../helpers/api.ts";
import { cosignSignature, makeKey, verifyToml } from "../helpers/cosign.ts";
import {
  descOf,
  imageManifest,
  jsonBytes,
  OCI_CONFIG,
  OCI_MANIFEST,
  putManifest,
} from "../helpers/oci_content.ts";
import { sha256 } from "../helpers/bytes.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { distributionMissing, startDistribution } from "./_distribution.ts";

const skip = distributionMissing();
const NAME = "team/app";

/** POST then PUT with the digest: distribution takes no monolithic POST. */
async function upload(url: string, bytes: Uint8Array): Promise<void> {
  const start = await fetch(`${url}/v2/${NAME}/blobs/uploads/`, { method: "POST" });
  await start.body?.cancel();
  assert.equal(start.status, 202);
  const loc = new URL(start.headers.get("location")!, url);
  loc.searchParams.set("digest", await sha256(bytes));
  const done = await fetch(loc, { method: "PUT", body: bytes as BodyInit });
  await done.body?.cancel();
  assert.equal(done.status, 201);
}

async function image(up: TestServer, label: string) {
  const cfg = jsonBytes({ os: "linux", architecture: "amd64", label, n: crypto.randomUUID() });
  await upload(up.url, cfg);
  const body = imageManifest(await descOf(OCI_CONFIG, cfg), []);
  return { body, digest: await sha256(body) };
}

Deno.test({
  name: "verify pull-through of docker-registry: a signed image is served, an unsigned one held",
  ignore: skip !== null,
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const key = await makeKey();
    const dist = await startDistribution();
    try {
      // The upstream as a TestServer for the push helpers (only its URL is used).
      const up = { url: dist.url } as TestServer;
      const signed = await image(up, "signed");
      const plain = await image(up, "plain");
      assert.equal((await putManifest(up, NAME, "signed", signed.body)).status, 201);
      assert.equal((await putManifest(up, NAME, "plain", plain.body)).status, 201);
      const sig = await cosignSignature(key, `${dist.host}/${NAME}`, signed.digest);
      for (const b of sig.blobs) await upload(dist.url, b.bytes);
      const pushed = await putManifest(up, NAME, sig.tag, sig.manifest);
      assert.equal(pushed.status, 201, await pushed.text());

      const config = `[repository."hub"]\n[[repository."hub".upstream]]\nurl = "${dist.url}"\n` +
        verifyToml("hub", "enforce", { ci: key });
      await withServer({ config }, async (s) => {
        // distribution serves an OCI manifest only to a client that accepts it, as docker does
        const accept = { accept: `${OCI_MANIFEST}, application/vnd.oci.image.index.v1+json` };
        const ok = await req(s, `/v2/hub/${NAME}/manifests/signed`, { headers: accept });
        assert.equal(ok.status, 200, await ok.clone().text());
        assert.equal(ok.headers.get("docker-content-digest"), signed.digest);
        await ok.body?.cancel();
        const st = await (await req(s, `/v2/hub/${NAME}/_svc/signatures/signed`)).json();
        assert.equal(st.verified, true);
        assert.equal(st.signers[0].signer, "key:ci");
        const no = await req(s, `/v2/hub/${NAME}/manifests/plain`, { headers: accept });
        const e = await assertErrorCode(no, 403, "DENIED");
        assert.match(
          String(e.detail),
          new RegExp(`no signature by a trusted key for ${plain.digest}`),
        );
      });
    } finally {
      await dist.stop();
    }
  },
});
