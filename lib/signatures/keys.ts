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

/**
 * The trusted key whose signature `sig` over `data` is, or null; each try spends the budget.
 * ECDSA goes through WebCrypto, which Deno runs off the serving thread (a P-256 check is ~0.7 ms
 * of CPU here either way, node:crypto's on the calling thread); Ed25519 and RSA through
 * node:crypto, as sigstore's libraries check them.
 */
export async function trustedSigner(
  keys: TrustedKey[],
  data: Uint8Array,
  sig: Uint8Array,
  budget: Budget,
): Promise<TrustedKey | null> {
  for (const k of keys) {
    for (const alg of digestsFor(k)) {
      budget.spend();
      try {
        if (await verifies(k, alg, data, sig)) return k;
      } catch { /* a malformed signature for this key type: not this key */ }
    }
  }
  return null;
}

async function verifies(
  k: TrustedKey,
  alg: string | null,
  data: Uint8Array,
  sig: Uint8Array,
): Promise<boolean> {
  const size = k.algorithm === "ecdsa-p256" ? 32 : k.algorithm === "ecdsa-p384" ? 48 : 0;
  if (size === 0) return verify(alg, data, keyObject(k), sig);
  const raw = ecdsaRaw(sig, size);
  if (!raw) return false;
  return await crypto.subtle.verify(
    { name: "ECDSA", hash: alg === "sha384" ? "SHA-384" : "SHA-256" },
    await webKey(k),
    raw as BufferSource,
    data as BufferSource,
  );
}

const webKeys = new WeakMap<TrustedKey, Promise<CryptoKey>>();

function webKey(k: TrustedKey): Promise<CryptoKey> {
  let p = webKeys.get(k);
  if (!p) {
    const spki = keyObject(k).export({ type: "spki", format: "der" });
    p = crypto.subtle.importKey(
      "spki",
      new Uint8Array(spki) as BufferSource,
      { name: "ECDSA", namedCurve: k.algorithm === "ecdsa-p384" ? "P-384" : "P-256" },
      false,
      ["verify"],
    );
    webKeys.set(k, p);
  }
  return p;
}

/**
 * An ASN.1 DER ECDSA signature (SEQUENCE of the INTEGERs r and s, what cosign writes) as the
 * r‖s WebCrypto takes, each `size` bytes; null when it is not one (strict DER: no trailing
 * bytes, minimal lengths, positive integers that fit).
 */
export function ecdsaRaw(der: Uint8Array, size: number): Uint8Array | null {
  let at = 0;
  const byte = () => (at < der.length ? der[at++] : -1);
  const length = (): number => {
    const b = byte();
    if (b < 0x80) return b;
    if (b !== 0x81) return -1; // at most 2 + 2 * (48 + 3) bytes: one length byte is enough
    const n = byte();
    return n >= 0x80 ? n : -1;
  };
  if (byte() !== 0x30) return null;
  const total = length();
  if (total < 0 || at + total !== der.length) return null;
  const out = new Uint8Array(2 * size);
  for (let i = 0; i < 2; i++) {
    if (byte() !== 0x02) return null;
    const n = length();
    if (n <= 0 || at + n > der.length) return null;
    let v = der.subarray(at, at + n);
    at += n;
    if (v[0] & 0x80) return null; // negative
    if (v.length > 1 && v[0] === 0 && !(v[1] & 0x80)) return null; // not minimal
    if (v[0] === 0 && v.length > 1) v = v.subarray(1);
    if (v.length > size) return null;
    out.set(v, (i + 1) * size - v.length);
  }
  return at === der.length ? out : null;
}

export const keySigner = (k: TrustedKey) => `key:${k.name}`;

/** Refused when no key is trusted at all. */
export function needKeys(keys: TrustedKey[]): void {
  if (keys.length === 0) throw new Refused("signed by a key, but no keys are trusted");
}
