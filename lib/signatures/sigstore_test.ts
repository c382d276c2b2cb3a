// Sigstore bundles as OCI 1.1 referrers: cosign's published bundle vector, key-based bundles from
// @sigstore/sign, keyless ones through @sigstore/mock's Fulcio and Rekor.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import {
  bundleArtifact,
  ecKeys,
  keyBundle,
  pemOf,
  sha256,
  type SigstoreWorld,
  sigstoreWorld,
} from "../../tests/helpers/signing.ts";
import { parseVerifyConfig } from "../config/mod.ts";
import { verifySubject } from "./mod.ts";

const FIXTURES = fileURLToPath(new URL("../../tests/fixtures/signatures/", import.meta.url));
const IMAGE = sha256("an image manifest");
const OTHER = sha256("another image manifest");

Deno.test("cosign's OCI bundle vector verifies against cosign's trusted root, for its image only", async () => {
  // sigstore/cosign pkg/cosign/testdata (see tests/fixtures/signatures/README.md): a keyless
  // public-good bundle for sha256:7321122…; cosign's own test accepts it for any identity.
  const bundle = JSON.parse(
    await Deno.readTextFile(`${FIXTURES}cosign-oci-attestation.sigstore.json`),
  );
  const subject = "sha256:732112270d7e59418a8c080b134b24cabd67d250d0d0147a97ed95ba5c280aa4";
  const cfg = (san: Record<string, string>) =>
    parseVerifyConfig({
      mode: "enforce",
      sigstore: {
        trusted_root: `${FIXTURES}cosign-trusted_root_pgi.json`,
        identities: [{ ...san, issuer_regex: ".*" }],
      },
    });
  const v = await verifySubject(
    subject,
    [bundleArtifact(bundle, subject)],
    cfg({ san_regex: ".*" }),
  );
  assert.equal(v.verified, true, v.reason ?? "");
  assert.match(v.signers[0].signer!, /^sigstore:.+ \(https:\/\/.+\)$/);
  assert.equal(v.signers[0].format, "sigstore-bundle");

  const wrongId = await verifySubject(
    subject,
    [bundleArtifact(bundle, subject)],
    cfg({ san: "wrong" }),
  );
  assert.equal(wrongId.verified, false);
  assert.match(wrongId.signers[0].reason!, /which no configured identity accepts/);

  const other = await verifySubject(
    OTHER,
    [bundleArtifact(bundle, OTHER)],
    cfg({ san_regex: ".*" }),
  );
  assert.equal(other.verified, false);
  assert.match(
    other.signers[0].reason!,
    new RegExp(`names sha256:732112270d7e.*not the subject ${OTHER}`),
  );

  // a log entry whose body no longer matches its inclusion proof
  const tampered = structuredClone(bundle);
  tampered.verificationMaterial.tlogEntries[0].logIndex = "1";
  const bad = await verifySubject(
    subject,
    [bundleArtifact(tampered, subject)],
    cfg({ san_regex: ".*" }),
  );
  assert.equal(bad.verified, false);
  assert.match(bad.signers[0].reason!, /^log entry does not verify/);
});

Deno.test("key-based bundles from @sigstore/sign: the trusted key verifies, another key does not", async () => {
  const ci = ecKeys();
  const stranger = ecKeys();
  const cfg = parseVerifyConfig({ mode: "enforce", keys: { ci: pemOf(ci.publicKey) } });
  const good = await keyBundle(IMAGE, ci.privateKey, pemOf(ci.publicKey));
  const v = await verifySubject(IMAGE, [bundleArtifact(good, IMAGE)], cfg);
  assert.equal(v.verified, true, v.reason ?? "");
  assert.equal(v.signers[0].signer, "key:ci");

  const wrong = await keyBundle(IMAGE, stranger.privateKey, pemOf(stranger.publicKey));
  const w = await verifySubject(IMAGE, [bundleArtifact(wrong, IMAGE)], cfg);
  assert.equal(w.signers[0].reason, "signed by an untrusted key");

  // a statement about another image, signed by the trusted key
  const other = await keyBundle(OTHER, ci.privateKey, pemOf(ci.publicKey));
  const o = await verifySubject(IMAGE, [bundleArtifact(other, IMAGE)], cfg);
  assert.match(o.signers[0].reason!, new RegExp(`names ${OTHER}, not the subject ${IMAGE}`));

  // the envelope's payload changed after signing
  const changed = structuredClone(good) as { dsseEnvelope: { payload: string } };
  const stmt = JSON.parse(atob(changed.dsseEnvelope.payload));
  stmt.predicate = { evil: true };
  changed.dsseEnvelope.payload = btoa(JSON.stringify(stmt));
  const c = await verifySubject(IMAGE, [bundleArtifact(changed, IMAGE)], cfg);
  assert.equal(c.verified, false);
});

async function withWorld(f: (w: SigstoreWorld, root: string) => Promise<void>) {
  const world = await sigstoreWorld();
  const dir = await Deno.makeTempDir();
  try {
    const root = `${dir}/trusted_root.json`;
    await Deno.writeTextFile(root, JSON.stringify(world.trustedRoot));
    await f(world, root);
  } finally {
    await world.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("keyless bundles through the mock Fulcio and Rekor: identity, expiry, log entry", async () => {
  await withWorld(async (world, root) => {
    const cfg = parseVerifyConfig({
      mode: "enforce",
      sigstore: {
        trusted_root: root,
        identities: [{ san_regex: "[a-z]+@example\\.com", issuer: "https://issuer.example" }],
      },
    });
    const good = await world.keylessBundle(IMAGE, "ci@example.com", "https://issuer.example");
    const v = await verifySubject(IMAGE, [bundleArtifact(good, IMAGE)], cfg);
    assert.equal(v.verified, true, v.reason ?? "");
    assert.equal(v.signers[0].signer, "sigstore:ci@example.com (https://issuer.example)");

    // the regex is anchored: a SAN that merely contains a match is not accepted
    const sly = await world.keylessBundle(IMAGE, "ci@example.com.evil", "https://issuer.example");
    const s = await verifySubject(IMAGE, [bundleArtifact(sly, IMAGE)], cfg);
    assert.equal(s.verified, false);
    assert.match(s.signers[0].reason!, /which no configured identity accepts/);

    const issuer = await world.keylessBundle(IMAGE, "ci@example.com", "https://other.example");
    const i = await verifySubject(IMAGE, [bundleArtifact(issuer, IMAGE)], cfg);
    assert.equal(i.verified, false);

    // a certificate that had expired when the log entry was made (Fulcio's 10-minute certs)
    const expired = await world.keylessBundle(
      IMAGE,
      "ci@example.com",
      "https://issuer.example",
      new Date(Date.now() - 3_600_000),
    );
    const e = await verifySubject(IMAGE, [bundleArtifact(expired, IMAGE)], cfg);
    assert.equal(e.verified, false);
    assert.match(e.signers[0].reason!, /^certificate expired or not valid at signing time/);

    // a log entry whose signed timestamp does not verify
    const broken = structuredClone(good) as {
      verificationMaterial: { tlogEntries: { integratedTime: string }[] };
    };
    const entry = broken.verificationMaterial.tlogEntries[0];
    entry.integratedTime = String(Number(entry.integratedTime) + 1);
    const b = await verifySubject(IMAGE, [bundleArtifact(broken, IMAGE)], cfg);
    assert.equal(b.verified, false);
    assert.match(b.signers[0].reason!, /^log entry does not verify/);

    // no log entry at all, with the default tlog_threshold of 1
    const bare = structuredClone(good) as { verificationMaterial: { tlogEntries: unknown[] } };
    bare.verificationMaterial.tlogEntries = [];
    const n = await verifySubject(IMAGE, [bundleArtifact(bare, IMAGE)], cfg);
    assert.equal(n.verified, false);
  });
});

Deno.test("threshold 2: one keyless signer and one trusted key make two; one alone does not", async () => {
  await withWorld(async (world, root) => {
    const ci = ecKeys();
    const cfg = parseVerifyConfig({
      mode: "enforce",
      threshold: 2,
      keys: { ci: pemOf(ci.publicKey) },
      sigstore: {
        trusted_root: root,
        identities: [{ san: "ci@example.com", issuer: "https://issuer.example" }],
      },
    });
    const keyless = bundleArtifact(
      await world.keylessBundle(IMAGE, "ci@example.com", "https://issuer.example"),
      IMAGE,
    );
    // with a root configured, a key-based bundle needs its log entry too
    const unlogged = bundleArtifact(
      await keyBundle(IMAGE, ci.privateKey, pemOf(ci.publicKey)),
      IMAGE,
    );
    const u = await verifySubject(IMAGE, [unlogged], cfg);
    assert.match(
      u.signers[0].reason!,
      /^log entry does not verify: expected 1 tlog entries, got 0/,
    );
    const keyed = bundleArtifact(
      await keyBundle(IMAGE, ci.privateKey, pemOf(ci.publicKey), world.url),
      IMAGE,
    );
    const one = await verifySubject(IMAGE, [keyless], cfg);
    assert.equal(one.verified, false);
    assert.match(one.reason!, /^1 of the 2 trusted signers required/);
    const two = await verifySubject(IMAGE, [keyless, keyed], cfg);
    assert.equal(two.verified, true, two.reason ?? "");
  });
});

Deno.test("malformed bundles get a reason", async () => {
  const cfg = parseVerifyConfig({ mode: "enforce", keys: { ci: pemOf(ecKeys().publicKey) } });
  for (
    const [json, reason] of [
      [{ mediaType: "nope" }, /the sigstore bundle is malformed/],
      ["just a string", /the sigstore bundle is malformed/],
      [JSON.parse("[".repeat(40) + "]".repeat(40)), /nests deeper than 32/],
    ] as [unknown, RegExp][]
  ) {
    const v = await verifySubject(IMAGE, [bundleArtifact(json, IMAGE)], cfg);
    assert.equal(v.verified, false);
    assert.match(v.signers[0].reason!, reason);
  }
});
