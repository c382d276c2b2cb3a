// cosign tag-based signatures: key-based and keyless (certificate + Rekor bundle annotations).
import assert from "node:assert/strict";
import { ecKeys, pemOf, sha256, sigstoreWorld } from "../../tests/helpers/signing.ts";
import { cosignArtifact, cosignSign, simpleSigningPayload } from "../../tests/helpers/signing.ts";
import { parseVerifyConfig } from "../config/mod.ts";
import { verifySubject } from "./mod.ts";

const IMAGE = sha256("an image manifest");
const OTHER = sha256("another image manifest");

function keyConfig(pems: Record<string, string>, extra: Record<string, unknown> = {}) {
  return parseVerifyConfig({ mode: "enforce", keys: pems, ...extra });
}

Deno.test("the payload fixture is byte for byte what cosign writes (cosign TestObsoletePayload)", () => {
  // sigstore/cosign pkg/cosign/obsolete_test.go @ d6d86c224e58: cosign's payload for
  // docker.io/namespace/image@sha256:4aa3054270f7a70b4528f2064ee90961788e1e1518703592ae4463de3b889dec
  const digest = "sha256:4aa3054270f7a70b4528f2064ee90961788e1e1518703592ae4463de3b889dec";
  assert.equal(
    new TextDecoder().decode(simpleSigningPayload(digest, "index.docker.io/namespace/image")),
    `{"critical":{"identity":{"docker-reference":"index.docker.io/namespace/image"},"image":{"docker-manifest-digest":"sha256:4aa3054270f7a70b4528f2064ee90961788e1e1518703592ae4463de3b889dec"},"type":"cosign container image signature"},"optional":null}`,
  );
});

Deno.test("cosign key-based: a trusted key verifies, the wrong key and a tampered payload do not", async () => {
  const ci = ecKeys();
  const stranger = ecKeys();
  const cfg = keyConfig({ ci: pemOf(ci.publicKey) });
  const payload = simpleSigningPayload(IMAGE);

  const good = await verifySubject(IMAGE, [
    cosignArtifact([{ payload, signature: cosignSign(payload, ci.privateKey) }]),
  ], cfg);
  assert.equal(good.verified, true, good.reason ?? "");
  assert.equal(good.signers[0].signer, "key:ci");
  assert.equal(good.signers[0].format, "cosign-tag");

  const wrong = await verifySubject(IMAGE, [
    cosignArtifact([{ payload, signature: cosignSign(payload, stranger.privateKey) }]),
  ], cfg);
  assert.equal(wrong.verified, false);
  assert.equal(wrong.signers[0].reason, "signed by an untrusted key");
  assert.match(wrong.reason!, new RegExp(`^no signature by a trusted key for ${IMAGE}`));

  // a valid signature by the trusted key, but over a payload naming another image
  const other = simpleSigningPayload(OTHER);
  const tampered = await verifySubject(IMAGE, [
    cosignArtifact([{ payload: other, signature: cosignSign(other, ci.privateKey) }]),
  ], cfg);
  assert.equal(tampered.verified, false);
  assert.equal(tampered.signers[0].reason, `payload names ${OTHER}, not the subject ${IMAGE}`);

  // bytes changed after signing
  const flipped = simpleSigningPayload(IMAGE, "registry.example/evil");
  const changed = await verifySubject(IMAGE, [
    cosignArtifact([{ payload: flipped, signature: cosignSign(payload, ci.privateKey) }]),
  ], cfg);
  assert.equal(changed.signers[0].reason, "signed by an untrusted key");
});

Deno.test("cosign key-based: Ed25519, P-384 and RSA keys as cosign and skopeo sign with them", async () => {
  const { generateKeyPairSync, sign } = await import("node:crypto");
  const payload = simpleSigningPayload(IMAGE);
  const cases = [
    { kp: generateKeyPairSync("ed25519"), alg: null },
    { kp: generateKeyPairSync("ec", { namedCurve: "P-384" }), alg: "sha384" },
    { kp: generateKeyPairSync("rsa", { modulusLength: 2048 }), alg: "sha256" },
  ];
  for (const { kp, alg } of cases) {
    const cfg = keyConfig({ k: pemOf(kp.publicKey) });
    const sig = sign(alg, payload, kp.privateKey).toString("base64");
    const v = await verifySubject(IMAGE, [cosignArtifact([{ payload, signature: sig }])], cfg);
    assert.equal(v.verified, true, `${kp.publicKey.asymmetricKeyType}: ${v.reason}`);
  }
});

Deno.test("cosign: threshold 2 counts distinct signers; one signer twice is one", async () => {
  const a = ecKeys();
  const b = ecKeys();
  const cfg = keyConfig({ a: pemOf(a.publicKey), b: pemOf(b.publicKey) }, { threshold: 2 });
  const payload = simpleSigningPayload(IMAGE);
  const sigA = { payload, signature: cosignSign(payload, a.privateKey) };
  const sigB = { payload, signature: cosignSign(payload, b.privateKey) };
  const one = await verifySubject(IMAGE, [cosignArtifact([sigA, sigA])], cfg);
  assert.equal(one.verified, false);
  assert.equal(one.reason, `1 of the 2 trusted signers required have signed ${IMAGE}`);
  const two = await verifySubject(IMAGE, [cosignArtifact([sigA, sigB])], cfg);
  assert.equal(two.verified, true, two.reason ?? "");
  assert.deepEqual(two.signers.map((s) => s.signer), ["key:a", "key:b"]);
});

Deno.test("cosign: malformed layers each get a reason, never an exception", async () => {
  const ci = ecKeys();
  const cfg = keyConfig({ ci: pemOf(ci.publicKey) });
  const payload = simpleSigningPayload(IMAGE);
  const te = new TextEncoder();
  const cases: [Uint8Array, string, RegExp][] = [
    [payload, "not base64!", /signature annotation is not base64/],
    [te.encode("not json"), cosignSign(payload, ci.privateKey), /payload is not valid JSON/],
    [te.encode('{"critical":{"type":"other","image":{}}}'), "AAAA", /critical.type is not/],
    [
      te.encode(
        `{"critical":{"type":"cosign container image signature","image":{"docker-manifest-digest":"${IMAGE}","Docker-manifest-digest":"${OTHER}"}}}`,
      ),
      "AAAA",
      /spells docker-manifest-digest more than one way/,
    ],
    [te.encode("[".repeat(5000)), "AAAA", /nests deeper than 32/],
  ];
  for (const [p, sig, reason] of cases) {
    const v = await verifySubject(IMAGE, [cosignArtifact([{ payload: p, signature: sig }])], cfg);
    assert.equal(v.verified, false);
    assert.match(v.signers[0].reason!, reason);
  }
  // cosign's Go decoder matches field names case-insensitively; so does the engine
  const upper = te.encode(
    `{"Critical":{"Type":"cosign container image signature","Image":{"Docker-manifest-digest":"${IMAGE}"}}}`,
  );
  const v = await verifySubject(IMAGE, [
    cosignArtifact([{ payload: upper, signature: cosignSign(upper, ci.privateKey) }]),
  ], cfg);
  assert.equal(v.verified, true, v.reason ?? "");
});

Deno.test("cosign keyless: certificate + Rekor bundle annotations verify against the trusted root", async () => {
  const world = await sigstoreWorld();
  try {
    const dir = await Deno.makeTempDir();
    const root = `${dir}/trusted_root.json`;
    await Deno.writeTextFile(root, JSON.stringify(world.trustedRoot));
    const cfg = parseVerifyConfig({
      mode: "enforce",
      sigstore: {
        trusted_root: root,
        identities: [{ san: "ci@example.com", issuer: "https://issuer.example" }],
      },
    });
    const layer = await world.keylessCosign(IMAGE, "ci@example.com", "https://issuer.example");
    const good = await verifySubject(IMAGE, [cosignArtifact([layer])], cfg);
    assert.equal(good.verified, true, good.reason ?? "");
    assert.equal(good.signers[0].signer, "sigstore:ci@example.com (https://issuer.example)");

    // another identity signed it
    const other = await world.keylessCosign(IMAGE, "mallory@example.com", "https://issuer.example");
    const wrong = await verifySubject(IMAGE, [cosignArtifact([other])], cfg);
    assert.equal(wrong.verified, false);
    assert.match(
      wrong.signers[0].reason!,
      /mallory@example.com \(https:\/\/issuer.example\), which no configured identity accepts/,
    );
    assert.equal(wrong.signers[0].signer, "sigstore:mallory@example.com (https://issuer.example)");

    // the log entry's SET does not verify once its index is changed
    const bundle = JSON.parse(layer.annotations!["dev.sigstore.cosign/bundle"]);
    bundle.Payload.logIndex += 1;
    const broken = {
      ...layer,
      annotations: { ...layer.annotations, "dev.sigstore.cosign/bundle": JSON.stringify(bundle) },
    };
    const bad = await verifySubject(IMAGE, [cosignArtifact([broken])], cfg);
    assert.equal(bad.verified, false);
    assert.match(bad.signers[0].reason!, /^log entry does not verify/);

    // no root configured: a certificate signature cannot count
    const keysOnly = keyConfig({ ci: pemOf(ecKeys().publicKey) });
    const none = await verifySubject(IMAGE, [cosignArtifact([layer])], keysOnly);
    assert.match(none.signers[0].reason!, /no sigstore root is trusted/);
    await Deno.remove(dir, { recursive: true });
  } finally {
    await world.close();
  }
});
