// verifySubject's bounds and verdict rules, index platform rules and the trust fingerprint.
import assert from "node:assert/strict";
import {
  cosignArtifact,
  cosignSign,
  ecKeys,
  memoryArtifact,
  pemOf,
  sha256,
  simpleSigningPayload,
} from "../../tests/helpers/signing.ts";
import { parseVerifyConfig } from "../config/mod.ts";
import {
  checkSignature,
  type ImageVerdict,
  indexVerdict,
  SIGNATURE_LIMITS,
  type SignatureArtifact,
  trustFingerprint,
  verifySubject,
} from "./mod.ts";

const IMAGE = sha256("an image manifest");
const ci = ecKeys();
const cfg = parseVerifyConfig({ mode: "enforce", keys: { ci: pemOf(ci.publicKey) } });

Deno.test("no artifacts: not verified, saying what is missing", async () => {
  const v = await verifySubject(IMAGE, [], cfg, new Date(1_000_000));
  assert.deepEqual(v, {
    verified: false,
    signers: [],
    reason: `no signature by a trusted key for ${IMAGE}`,
    checkedAt: 1_000_000,
  });
  const bad = await verifySubject("sha512:abc", [], cfg);
  assert.equal(bad.reason, "sha512:abc is not a sha256 digest");
});

Deno.test("a million referrers cost at most LIMITS.artifacts reads", async () => {
  let reads = 0;
  const payload = simpleSigningPayload(sha256("someone else"));
  const one = cosignArtifact([{ payload, signature: cosignSign(payload, ci.privateKey) }]);
  const counting: SignatureArtifact = {
    ...one,
    readBlob: (d, max) => {
      reads++;
      return one.readBlob(d, max);
    },
  };
  const many = new Array<SignatureArtifact>(1_000_000).fill(counting);
  const t0 = performance.now();
  const v = await verifySubject(IMAGE, many, cfg);
  assert.ok(performance.now() - t0 < 2000);
  assert.equal(reads, SIGNATURE_LIMITS.artifacts);
  assert.equal(v.signers.length, SIGNATURE_LIMITS.artifacts);
  assert.match(v.reason!, /999984 more signature artifacts were not read$/);
});

Deno.test("a huge payload is refused by its declared size, never read", async () => {
  let asked = 0;
  const art = memoryArtifact("cosign-tag", {
    schemaVersion: 2,
    mediaType: "application/vnd.oci.image.manifest.v1+json",
    config: {
      mediaType: "application/vnd.oci.image.config.v1+json",
      size: 2,
      digest: sha256("{}"),
    },
    layers: [{
      mediaType: "application/vnd.dev.cosign.simplesigning.v1+json",
      size: 1 << 30,
      digest: sha256("x"),
      annotations: { "dev.cosignproject.cosign/signature": "AAAA" },
    }],
  }, new Map());
  art.readBlob = () => {
    asked++;
    return Promise.reject(new Error("must not be read"));
  };
  const v = await verifySubject(IMAGE, [art], cfg);
  assert.equal(asked, 0);
  assert.match(v.signers[0].reason!, /payload is larger than 65536 bytes/);
});

Deno.test("a blob reader handing back more than asked, or other bytes, is refused", async () => {
  const payload = simpleSigningPayload(IMAGE);
  const art = cosignArtifact([{ payload, signature: cosignSign(payload, ci.privateKey) }]);
  const big: SignatureArtifact = {
    ...art,
    readBlob: () => Promise.resolve(new Uint8Array(70_000)),
  };
  assert.match((await verifySubject(IMAGE, [big], cfg)).signers[0].reason!, /larger than/);
  const other: SignatureArtifact = {
    ...art,
    readBlob: () => Promise.resolve(simpleSigningPayload(sha256("other"))),
  };
  assert.match(
    (await verifySubject(IMAGE, [other], cfg)).signers[0].reason!,
    /does not match its digest/,
  );
  const failing: SignatureArtifact = { ...art, readBlob: () => Promise.reject(new Error("gone")) };
  assert.match(
    (await verifySubject(IMAGE, [failing], cfg)).signers[0].reason!,
    /cannot be read: gone/,
  );
});

Deno.test("many trusted keys and many signature layers stop at the signature-check budget", async () => {
  const keys: Record<string, string> = {};
  for (let i = 0; i < 40; i++) keys[`k${i}`] = pemOf(ecKeys().publicKey);
  const many = parseVerifyConfig({ mode: "enforce", keys });
  const stranger = ecKeys();
  const payload = simpleSigningPayload(IMAGE);
  const layer = { payload, signature: cosignSign(payload, stranger.privateKey) };
  const arts = Array.from(
    { length: 16 },
    () => cosignArtifact(new Array(SIGNATURE_LIMITS.layersPerArtifact).fill(layer)),
  );
  const t0 = performance.now();
  const v = await verifySubject(IMAGE, arts, many);
  assert.ok(performance.now() - t0 < 3000, `${performance.now() - t0} ms`);
  assert.equal(v.verified, false);
  assert.ok(v.signers.some((s) => /more than 256 signature checks/.test(s.reason ?? "")));
});

Deno.test("an unknown format and a manifest that is not one are verdicts", async () => {
  const odd = { ...cosignArtifact([]), format: "pgp" } as unknown as SignatureArtifact;
  const v = await verifySubject(IMAGE, [odd], cfg);
  assert.equal(v.signers[0].reason, "unknown signature format pgp");
  const junk: SignatureArtifact = {
    format: "cosign-tag",
    digest: sha256("junk"),
    manifest: new TextEncoder().encode("{".repeat(100_000)),
    readBlob: () => Promise.reject(new Error("no")),
  };
  assert.match((await verifySubject(IMAGE, [junk], cfg)).signers[0].reason!, /nests deeper/);
  const noLayers = memoryArtifact("sigstore-bundle", { schemaVersion: 2, layers: [] }, new Map());
  assert.match((await verifySubject(IMAGE, [noLayers], cfg)).signers[0].reason!, /no layers/);
});

Deno.test("index verdicts follow the platform rule; a signed index covers its platforms", () => {
  const yes: ImageVerdict = { verified: true, signers: [], checkedAt: 0 };
  const no: ImageVerdict = { verified: false, signers: [], reason: "x", checkedAt: 0 };
  const idx = sha256("index");
  const kids = [
    { platform: "linux/amd64", digest: sha256("amd64"), verdict: yes },
    { platform: "linux/arm64", digest: sha256("arm64"), verdict: no },
    { platform: "unknown/unknown", digest: sha256("attestation"), verdict: no },
  ];
  assert.equal(indexVerdict(idx, yes, kids, { platforms: "all" }).verified, true);
  const all = indexVerdict(idx, no, kids, { platforms: "all" });
  assert.equal(all.verified, false);
  assert.equal(
    all.reason,
    `no signature by a trusted key for ${idx} nor for linux/arm64 (${sha256("arm64")})`,
  );
  assert.equal(indexVerdict(idx, no, kids, { platforms: "any" }).verified, true);
  assert.equal(indexVerdict(idx, no, kids, { platforms: ["linux/amd64"] }).verified, true);
  assert.equal(indexVerdict(idx, no, kids, { platforms: ["linux/arm64"] }).verified, false);
  assert.match(
    indexVerdict(idx, no, kids, { platforms: ["windows/amd64"] }).reason!,
    /lists none of the platforms windows\/amd64/,
  );
  assert.equal(indexVerdict(idx, no, [], { platforms: "all" }).verified, false);
});

Deno.test("the trust fingerprint changes with the trust material, not with key order", () => {
  const a = pemOf(ecKeys().publicKey);
  const b = pemOf(ecKeys().publicKey);
  const f = (keys: Record<string, string>, extra = {}) =>
    trustFingerprint(parseVerifyConfig({ mode: "enforce", keys, ...extra }));
  assert.equal(f({ a, b }), f({ b, a }));
  assert.notEqual(f({ a, b }), f({ a }));
  assert.notEqual(f({ a }), f({ a }, { threshold: 2 }));
  assert.equal(f({ a }), f({ a }, { hold_secs: 5, mode: "warn" }));
  assert.match(f({ a }), /^sha256:[a-f0-9]{64}$/);
});

Deno.test("checkSignature checks one artifact alone; verifySubject takes it as checked, not again", async () => {
  const payload = simpleSigningPayload(IMAGE);
  const good = cosignArtifact([{ payload, signature: cosignSign(payload, ci.privateKey) }]);
  const alone = await checkSignature(IMAGE, good, cfg);
  assert.deepEqual(alone.map((s) => [s.signer, s.valid]), [["key:ci", true]]);
  // The pushed signature's check began before the stored ones were read: its verdicts are used
  // as they are (its blobs are not read a second time), the stored artifacts checked as usual.
  let reads = 0;
  const counted: SignatureArtifact = {
    ...good,
    readBlob: (d, max) => {
      reads++;
      return good.readBlob(d, max);
    },
  };
  const other = sha256("someone else");
  const stored = cosignArtifact([{
    payload: simpleSigningPayload(other),
    signature: cosignSign(simpleSigningPayload(other), ci.privateKey),
  }]);
  const v = await verifySubject(IMAGE, [stored, counted], cfg, new Date(), {
    checked: new Map([[good.digest, Promise.resolve(alone)]]),
  });
  assert.equal(reads, 0);
  assert.equal(v.verified, true);
  assert.deepEqual(v.signers.map((s) => s.valid), [false, true]);
  assert.match(v.signers[0].reason!, /payload names/);
  // Without it, the same artifact is read and checked here.
  const w = await verifySubject(IMAGE, [counted], cfg);
  assert.equal(reads, 1);
  assert.equal(w.verified, true);
});
