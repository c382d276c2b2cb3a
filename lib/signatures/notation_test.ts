// Notation envelopes: the notation project's published vectors (JWS and COSE), and envelopes
// made here over generated chains for the cases the vectors do not cover.
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { X509Certificate } from "node:crypto";
import { fileURLToPath } from "node:url";
import {
  NOTATION_TYPE,
  notationChain,
  notationCose,
  notationJws,
  referrerArtifact,
  sha256,
} from "../../tests/helpers/signing.ts";
import { parseVerifyConfig } from "../config/mod.ts";
import { verifySubject } from "./mod.ts";

const FIXTURES = fileURLToPath(new URL("../../tests/fixtures/signatures/", import.meta.url));
const IMAGE = sha256("an image manifest");
const OTHER = sha256("another image manifest");
// notation-go internal/mock: the digest its ca_*_sig_env.json envelopes sign
const MOCK_SUBJECT = "sha256:60043cf45eaebc4c0867fea485a039b598f52fd09fd5b07b0b2d2f88fad9d74e";
// notation-go internal/testdata: the digest jws_signature.sig and cose_signature.sig sign
const LAYOUT_SUBJECT = "sha256:19dbd2e48e921426ee8ace4dc892edfb2ecdc1d1a72d5416c83670c30acecef0";
const TEST_ROOT_DN = "C=US, ST=WA, L=Seattle, O=Notary, CN=Notation Test Root";

const vector = (name: string) => Deno.readFileSync(`${FIXTURES}${name}`);
const jwsArtifact = (bytes: Uint8Array, subject: string) =>
  referrerArtifact("notation", NOTATION_TYPE, "application/jose+json", bytes, subject);
const coseArtifact = (bytes: Uint8Array, subject: string) =>
  referrerArtifact("notation", NOTATION_TYPE, "application/cose", bytes, subject);

function config(trustStore: string[], identities: string[]) {
  return parseVerifyConfig({ mode: "enforce", notation: { trust_store: trustStore, identities } });
}

/** The self-signed leaf of notation's jws_signature.sig, as a trust-store PEM. */
function alpineLeafPem(): string {
  const jws = JSON.parse(new TextDecoder().decode(vector("notation-jws_signature.sig")));
  return new X509Certificate(Buffer.from(jws.header.x5c[0], "base64")).toString();
}

Deno.test("notation's JWS vector (PS384, chain to the Notation Test Root) verifies", async () => {
  const cfg = config([`${FIXTURES}notation-NotationTestRoot.pem`], [
    `x509.subject: ${TEST_ROOT_DN}`,
  ]);
  const art = jwsArtifact(vector("notation-ca_valid_sig_env.json"), MOCK_SUBJECT);
  const v = await verifySubject(MOCK_SUBJECT, [art], cfg);
  assert.equal(v.verified, true, v.reason ?? "");
  assert.equal(v.signers[0].signer, `notation:${TEST_ROOT_DN}`);
  assert.equal(v.signers[0].format, "notation");

  // the same envelope for another image: its payload names MOCK_SUBJECT
  const other = await verifySubject(OTHER, [
    jwsArtifact(vector("notation-ca_valid_sig_env.json"), OTHER),
  ], cfg);
  assert.equal(other.signers[0].reason, `payload names ${MOCK_SUBJECT}, not the subject ${OTHER}`);

  // another identity is required
  const strict = config([`${FIXTURES}notation-NotationTestRoot.pem`], [
    "C=US, O=Notary, CN=release",
  ]);
  const id = await verifySubject(MOCK_SUBJECT, [art], strict);
  assert.match(id.signers[0].reason!, /which no configured identity accepts/);
  // an identity naming fewer attributes matches (each named one must be equal)
  const loose = config([`${FIXTURES}notation-NotationTestRoot.pem`], [
    "O=Notary, CN=Notation Test Root",
  ]);
  assert.equal((await verifySubject(MOCK_SUBJECT, [art], loose)).verified, true);
});

Deno.test("notation's expired-signature vector and an expired certificate are refused", async () => {
  const cfg = config([`${FIXTURES}notation-NotationTestRoot.pem`], ["*"]);
  const expired = jwsArtifact(vector("notation-ca_expired_sig_env.json"), MOCK_SUBJECT);
  const v = await verifySubject(MOCK_SUBJECT, [expired], cfg);
  assert.equal(v.verified, false);
  assert.equal(v.signers[0].reason, "the signature expired at 2022-07-29T23:59:00.000Z");

  // the Notation Test Root's leaf is valid to 2122: a check in 2123 finds it expired
  const art = jwsArtifact(vector("notation-ca_valid_sig_env.json"), MOCK_SUBJECT);
  const late = await verifySubject(MOCK_SUBJECT, [art], cfg, new Date("2123-01-01T00:00:00Z"));
  assert.equal(late.verified, false);
  assert.match(late.signers[0].reason!, /^certificate \(C=US.*\) expired or not yet valid/);

  // a generated leaf whose validity ended yesterday
  const old = await notationChain(
    undefined,
    new Date(Date.now() - 86_400_000 * 30),
    new Date(Date.now() - 86_400_000),
  );
  const pemFile = await Deno.makeTempFile({ suffix: ".pem" });
  await Deno.writeTextFile(pemFile, old.rootPem);
  const g = await verifySubject(IMAGE, [await notationJws(IMAGE, old)], config([pemFile], ["*"]));
  assert.match(g.signers[0].reason!, /expired or not yet valid/);
  await Deno.remove(pemFile);
});

Deno.test("notation's JWS and COSE vectors on a self-signed leaf in the trust store verify", async () => {
  const cfg = config([alpineLeafPem()], ["C=US, ST=WA, L=Seattle, O=Notary, CN=alpine"]);
  const jws = await verifySubject(LAYOUT_SUBJECT, [
    jwsArtifact(vector("notation-jws_signature.sig"), LAYOUT_SUBJECT),
  ], cfg);
  assert.equal(jws.verified, true, jws.reason ?? "");
  const cose = await verifySubject(LAYOUT_SUBJECT, [
    coseArtifact(vector("notation-cose_signature.sig"), LAYOUT_SUBJECT),
  ], cfg);
  assert.equal(cose.verified, true, cose.reason ?? "");
  assert.equal(cose.signers[0].signer, "notation:C=US, ST=WA, L=Seattle, O=Notary, CN=alpine");

  // one flipped byte in the COSE signature
  const bytes = vector("notation-cose_signature.sig").slice();
  bytes[bytes.length - 10] ^= 1;
  const flipped = await verifySubject(LAYOUT_SUBJECT, [coseArtifact(bytes, LAYOUT_SUBJECT)], cfg);
  assert.equal(flipped.verified, false);
  assert.match(flipped.signers[0].reason!, /signature does not verify/);

  // a trust store that does not hold its root
  const other = await notationChain();
  const untrusted = config([other.rootPem], ["*"]);
  const u = await verifySubject(LAYOUT_SUBJECT, [
    jwsArtifact(vector("notation-jws_signature.sig"), LAYOUT_SUBJECT),
  ], untrusted);
  assert.equal(u.signers[0].reason, "the certificate chain does not end at a trusted root");
});

Deno.test("generated notation envelopes: JWS and COSE over a CA chain, unknown critical header", async () => {
  const c = await notationChain();
  const cfg = config([c.rootPem], ["C=US, O=Acme, CN=release"]);
  for (const art of [await notationJws(IMAGE, c), await notationCose(IMAGE, c)]) {
    const v = await verifySubject(IMAGE, [art], cfg);
    assert.equal(v.verified, true, v.reason ?? "");
    assert.equal(v.signers[0].signer, `notation:${c.leafSubject}`);
  }
  const future = await notationJws(IMAGE, c, { expiry: new Date(Date.now() + 60_000) });
  assert.equal((await verifySubject(IMAGE, [future], cfg)).verified, true);
  const crit = await notationJws(IMAGE, c, { crit: "io.example.unknown" });
  const v = await verifySubject(IMAGE, [crit], cfg);
  assert.equal(v.verified, false);
  assert.match(v.signers[0].reason!, /does not verify|critical/);
  const tampered = await verifySubject(OTHER, [await notationCose(IMAGE, c)], cfg);
  assert.equal(tampered.signers[0].reason, `payload names ${IMAGE}, not the subject ${OTHER}`);
});

Deno.test("malformed notation envelopes get a reason, a CBOR bomb included", async () => {
  const c = await notationChain();
  const cfg = config([c.rootPem], ["*"]);
  const te = new TextEncoder();
  const cases: [Uint8Array, "jws" | "cose", RegExp][] = [
    [te.encode("{}"), "jws", /not a flattened JWS/],
    [
      te.encode('{"payload":"x","protected":"y","signature":"z","header":{"x5c":["!!"]}}'),
      "jws",
      /not base64/,
    ],
    [
      te.encode('{"payload":"x","protected":"y","signature":"z","header":{"x5c":["AAAA"]}}'),
      "jws",
      /not an x509 certificate/,
    ],
    [new Uint8Array([0xff, 0x00]), "cose", /not valid CBOR/],
    [new Uint8Array(200_000).fill(0x81), "cose", /not valid CBOR|not a COSE_Sign1/],
    [new Uint8Array([0xd2, 0x84, 0x40, 0xa0, 0x40, 0x40]), "cose", /no x5chain/],
  ];
  for (const [bytes, kind, reason] of cases) {
    const art = kind === "jws" ? jwsArtifact(bytes, IMAGE) : coseArtifact(bytes, IMAGE);
    const t0 = performance.now();
    const v = await verifySubject(IMAGE, [art], cfg);
    assert.ok(performance.now() - t0 < 2000);
    assert.equal(v.verified, false);
    assert.match(v.signers[0].reason!, reason);
  }
});
