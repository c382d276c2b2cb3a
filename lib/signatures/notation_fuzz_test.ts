// Mutation fuzzing of notation envelopes (JWS and COSE): whatever the bytes, a verdict comes back
// quickly, and a valid one names the leaf the trust store vouches for.
import assert from "node:assert/strict";
import { FAST_MS, fc, fuzzParams, mutated, within } from "../../tests/helpers/fuzz.ts";
import {
  NOTATION_TYPE,
  notationChain,
  notationCose,
  notationJws,
  referrerArtifact,
  sha256,
} from "../../tests/helpers/signing.ts";
import { parseVerifyConfig } from "../config/mod.ts";
import { type SignatureArtifact, verifySubject } from "./mod.ts";

const IMAGE = sha256("an image manifest");
const chain = await notationChain();
const cfg = parseVerifyConfig({
  mode: "enforce",
  notation: { trust_store: [chain.rootPem], identities: ["*"] },
});

async function envelope(art: SignatureArtifact): Promise<Uint8Array> {
  const layer = JSON.parse(new TextDecoder().decode(art.manifest)).layers[0];
  return await art.readBlob(layer.digest, 1 << 20);
}

for (
  const [kind, make, mediaType] of [
    ["JWS", notationJws, "application/jose+json"],
    ["COSE", notationCose, "application/cose"],
  ] as const
) {
  const sample = await envelope(await make(IMAGE, chain));
  Deno.test(`fuzz notation: mutated ${kind} envelopes are verdicts`, async () => {
    await fc.assert(
      fc.asyncProperty(mutated(sample), async (b) => {
        const art = referrerArtifact("notation", NOTATION_TYPE, mediaType, b, IMAGE);
        const v = await within(FAST_MS, "verifySubject", () => verifySubject(IMAGE, [art], cfg));
        for (const s of v.signers) {
          if (s.valid) assert.equal(s.signer, `notation:${chain.leafSubject}`);
          else assert.equal(typeof s.reason, "string");
        }
      }),
      fuzzParams(),
    );
  });
}
