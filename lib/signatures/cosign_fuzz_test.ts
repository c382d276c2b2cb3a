// Mutation fuzzing of cosign tag signatures: payloads and `.sig` manifests as a pusher may
// send them. Whatever the bytes, verifySubject answers a verdict, quickly, and counts a
// signature only for the trusted key over a payload naming the subject.
import assert from "node:assert/strict";
import { FAST_MS, fc, fuzzParams, mutated, within } from "../../tests/helpers/fuzz.ts";
import {
  cosignArtifact,
  cosignSign,
  ecKeys,
  pemOf,
  sha256,
  simpleSigningPayload,
} from "../../tests/helpers/signing.ts";
import { parseVerifyConfig } from "../config/mod.ts";
import { type SignatureArtifact, verifySubject } from "./mod.ts";

const IMAGE = sha256("an image manifest");
const ci = ecKeys();
const cfg = parseVerifyConfig({ mode: "enforce", keys: { ci: pemOf(ci.publicKey) } });
const payload = simpleSigningPayload(IMAGE);
const good = cosignArtifact([{ payload, signature: cosignSign(payload, ci.privateKey) }]);

async function check(art: SignatureArtifact): Promise<void> {
  const v = await within(FAST_MS, "verifySubject", () => verifySubject(IMAGE, [art], cfg));
  for (const s of v.signers) {
    if (s.valid) assert.equal(s.signer, "key:ci");
    else assert.equal(typeof s.reason, "string");
  }
}

Deno.test("fuzz cosign: mutated payloads are verdicts", async () => {
  await fc.assert(
    fc.asyncProperty(mutated(payload), async (p) => {
      await check(cosignArtifact([{ payload: p, signature: cosignSign(p, ci.privateKey) }]));
    }),
    fuzzParams(),
  );
});

Deno.test("fuzz cosign: mutated .sig manifests are verdicts", async () => {
  await fc.assert(
    fc.asyncProperty(mutated(good.manifest), async (m) => {
      await check({ ...good, manifest: m });
    }),
    fuzzParams(),
  );
});
