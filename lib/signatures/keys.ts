// The configured trusted keys as KeyObjects (parsed once per config), and which of them made a
// signature.
import { createPublicKey, type KeyObject, verify } from "node:crypto";
import { type Budget, Refused } from "./limits.ts";
import type { TrustedKey } from "./types.ts";

const parsed = new WeakMap<TrustedKey, KeyObject>();

export function keyObject(k: TrustedKey): KeyObject {
  let o = parsed.get(k);
  if (!o) {
    o = createPublicKey(k.pem);
    parsed.set(k, o);
  }
  return o;
}

/** The hashes a signature over `data` may use with this key, as cosign and sigstore sign. */
function digestsFor(k: TrustedKey): (string | null)[] {
  switch (k.algorithm) {
    case "ed25519":
      return [null];
    case "ecdsa-p384":
      return ["sha384", "sha256"];
    default:
      return ["sha256"];
  }
}

/** The trusted key whose signature `sig` over `data` is, or null; each try spends the budget. */
export function trustedSigner(
  keys: TrustedKey[],
  data: Uint8Array,
  sig: Uint8Array,
  budget: Budget,
): TrustedKey | null {
  for (const k of keys) {
    for (const alg of digestsFor(k)) {
      budget.spend();
      try {
        if (verify(alg, data, keyObject(k), sig)) return k;
      } catch { /* a malformed signature for this key type: not this key */ }
    }
  }
  return null;
}

export const keySigner = (k: TrustedKey) => `key:${k.name}`;

/** Refused when no key is trusted at all. */
export function needKeys(keys: TrustedKey[]): void {
  if (keys.length === 0) throw new Refused("signed by a key, but no keys are trusted");
}
