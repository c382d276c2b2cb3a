// Mutation fuzzing of sigstore bundles pushed as referrers: whatever the bytes, a verdict comes
// back quickly, and a valid one names the trusted key.
import assert from "node:assert/strict";
import { FAST_MS, fc, fuzzParams, mutated, within } from "../../tests/helpers/fuzz.ts";
import {
  BUNDLE_TYPE,
  ecKeys,
  keyBundle,
  pemOf,
  referrerArtifact,
  sha256,
} from "../../tests/helpers/signing.ts";
import { parseVerifyConfig } from "../config/mod.ts";
import { verifySubject } from "./mod.ts";

const IMAGE = sha256("an image manifest");
const ci = ecKeys();
const cfg = parseVerifyConfig({ mode: "enforce", keys: { ci: pemOf(ci.publicKey) } });
const bundle = new TextEncoder().encode(
  JSON.stringify(await keyBundle(IMAGE, ci.privateKey, pemOf(ci.publicKey))),
);

Deno.test("fuzz sigstore: mutated bundles are verdicts", async () => {
  await fc.assert(
    fc.asyncProperty(mutated(bundle), async (b) => {
      const art = referrerArtifact("sigstore-bundle", BUNDLE_TYPE, BUNDLE_TYPE, b, IMAGE);
      const v = await within(FAST_MS, "verifySubject", () => verifySubject(IMAGE, [art], cfg));
      for (const s of v.signers) {
        if (s.valid) assert.equal(s.signer, "key:ci");
        else assert.equal(typeof s.reason, "string");
      }
    }),
    fuzzParams(),
  );
});
