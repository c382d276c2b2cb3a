// Verified before visible (issue 34) with signatures that arrive as OCI 1.1 referrers: a keyless
// sigstore bundle made by @sigstore/sign against @sigstore/mock's Fulcio and Rekor, pushed the way
// @sigstore/oci pushes it (its blobs, then the manifest by digest with a `subject`), releases its
// held image in the answer to that push. A signature's push judges its image before its own commit
// and settles the verdict in that commit; two signatures racing each other (threshold 2: a cosign
// `.sig` and a bundle at once) must still add up, each judgement pinned to what it read.
import assert from "node:assert/strict";
import { req, serverTestOpts } from "../helpers/api.ts";
import { cosignSignature, makeKey, pushSignature, tomlPem } from "../helpers/cosign.ts";
import { distinctManifest, OCI_MANIFEST, putManifest } from "../helpers/oci_content.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { bundleArtifact, sigstoreWorld } from "../helpers/signing.ts";

const NS = "signed/app";
const SAN = "ci@example.com";
const ISSUER = "https://issuer.example";

/** Pushes a referrer artifact as @sigstore/oci does: blobs, then the manifest by its digest. */
async function pushReferrer(
  s: TestServer,
  art: { digest: string; manifest: Uint8Array; blobs: Map<string, Uint8Array> },
): Promise<Response> {
  for (const [digest, bytes] of art.blobs) {
    const r = await req(s, `/v2/${NS}/blobs/uploads/?digest=${digest}`, {
      method: "POST",
      body: bytes as BodyInit,
    });
    await r.body?.cancel();
    assert.equal(r.status, 201, `blob ${digest}`);
  }
  return await req(s, `/v2/${NS}/manifests/${art.digest}`, {
    method: "PUT",
    body: art.manifest as BodyInit,
    headers: { "content-type": OCI_MANIFEST },
  });
}

async function statusOf(s: TestServer, ref: string) {
  const r = await req(s, `/v2/${NS}/manifests/${ref}`);
  await r.body?.cancel();
  return r.status;
}

async function signersOf(s: TestServer, ref: string): Promise<string[]> {
  const r = await req(s, `/v2/${NS}/_svc/signatures/${ref}`);
  const body = await r.json();
  assert.equal(r.status, 200, JSON.stringify(body));
  return (body.signers as { signer: string | null; valid: boolean }[])
    .filter((x) => x.valid).map((x) => x.signer ?? "").sort();
}

async function withWorld(
  threshold: number,
  fn: (
    s: TestServer,
    world: Awaited<ReturnType<typeof sigstoreWorld>>,
    key: Awaited<ReturnType<typeof makeKey>>,
  ) => Promise<void>,
) {
  const world = await sigstoreWorld();
  const dir = await Deno.makeTempDir({ prefix: "wharf-referrer-release-" });
  try {
    const root = `${dir}/trusted_root.json`;
    await Deno.writeTextFile(root, JSON.stringify(world.trustedRoot));
    const key = await makeKey();
    const config = `[repository."signed".verify]
mode = "enforce"
threshold = ${threshold}
[repository."signed".verify.keys]
ci = ${tomlPem(key.pem)}
[repository."signed".verify.sigstore]
trusted_root = "${root}"
identities = [{ san = "${SAN}", issuer = "${ISSUER}" }]
`;
    await withServer({ config }, (s) => fn(s, world, key));
  } finally {
    await world.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test(
  "verify enforce: a keyless bundle pushed as a referrer releases its held image in its own push",
  serverTestOpts,
  async () => {
    await withWorld(1, async (s, world) => {
      const image = await distinctManifest("referrer release");
      assert.equal((await putManifest(s, NS, "v1", image.body)).status, 201);
      assert.equal(await statusOf(s, "v1"), 403, "held until signed");
      const wrong = bundleArtifact(
        await world.keylessBundle(image.digest, "someone@example.com", ISSUER),
        image.digest,
      );
      const w = await pushReferrer(s, wrong);
      await w.body?.cancel();
      assert.equal(w.status, 201);
      assert.equal(await statusOf(s, "v1"), 403, "an identity nobody trusts releases nothing");
      const good = bundleArtifact(
        await world.keylessBundle(image.digest, SAN, ISSUER),
        image.digest,
      );
      const r = await pushReferrer(s, good);
      await r.body?.cancel();
      assert.equal(r.status, 201);
      // No wait: the release is in the referrer push's commit, answered before the 201.
      assert.equal(await statusOf(s, "v1"), 200);
      assert.equal(await statusOf(s, image.digest), 200);
      assert.deepEqual(await signersOf(s, "v1"), [`sigstore:${SAN} (${ISSUER})`]);
    });
  },
);

Deno.test(
  "verify enforce, threshold 2: a cosign signature and a bundle pushed at once add up, every time",
  serverTestOpts,
  async () => {
    await withWorld(2, async (s, world, key) => {
      // One alone is not enough, in either order of arrival.
      const one = await distinctManifest("threshold one");
      assert.equal((await putManifest(s, NS, "one", one.body)).status, 201);
      const sig = await pushSignature(s, NS, await cosignSignature(key, `x/${NS}`, one.digest));
      await sig.body?.cancel();
      assert.equal(sig.status, 201);
      assert.equal(await statusOf(s, "one"), 403, "1 of 2 signers");
      const b = await pushReferrer(
        s,
        bundleArtifact(await world.keylessBundle(one.digest, SAN, ISSUER), one.digest),
      );
      await b.body?.cancel();
      assert.equal(await statusOf(s, "one"), 200, "2 of 2 signers");

      // Racing: each push judges with what it read and its own signature; a judgement that
      // missed the other's commit must not be the one that stays.
      for (let i = 0; i < 12; i++) {
        const image = await distinctManifest(`race ${i}`);
        assert.equal((await putManifest(s, NS, `r${i}`, image.body)).status, 201);
        const cosign = await cosignSignature(key, `x/${NS}`, image.digest);
        const bundle = bundleArtifact(
          await world.keylessBundle(image.digest, SAN, ISSUER),
          image.digest,
        );
        const [a, c] = await Promise.all([pushSignature(s, NS, cosign), pushReferrer(s, bundle)]);
        await a.body?.cancel();
        await c.body?.cancel();
        assert.deepEqual([a.status, c.status], [201, 201]);
        assert.equal(await statusOf(s, `r${i}`), 200, `r${i}: both signatures landed`);
        assert.deepEqual(await signersOf(s, `r${i}`), [`key:ci`, `sigstore:${SAN} (${ISSUER})`]);
      }
    });
  },
);
