// The ECDSA signatures cosign writes (ASN.1 DER) turned into WebCrypto's r‖s: exactly what
// node:crypto accepts as DER, nothing else, and any bytes answered without throwing.
import assert from "node:assert/strict";
import { generateKeyPairSync, sign, verify } from "node:crypto";
import fc from "fast-check";
import { ecdsaRaw } from "./keys.ts";

for (const [curve, size, hash] of [["P-256", 32, "sha256"], ["P-384", 48, "sha384"]] as const) {
  Deno.test(`ecdsaRaw: ${curve} signatures in DER are r‖s as node:crypto signs them`, () => {
    const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: curve });
    for (let i = 0; i < 200; i++) {
      const data = crypto.getRandomValues(new Uint8Array(64));
      const der = sign(hash, data, privateKey);
      const raw = ecdsaRaw(der, size);
      assert.ok(raw, `signature ${i}`);
      assert.ok(verify(hash, data, { key: publicKey, dsaEncoding: "ieee-p1363" }, raw));
    }
  });
}

Deno.test("ecdsaRaw: not DER, or not minimal, or too long: null", () => {
  const int = (b: number[]) => [0x02, b.length, ...b];
  const seq = (...parts: number[][]) => {
    const body = parts.flat();
    return new Uint8Array([0x30, body.length, ...body]);
  };
  assert.deepEqual(
    ecdsaRaw(seq(int([1]), int([2])), 32)?.slice(30, 34),
    new Uint8Array([0, 1, 0, 0]),
  );
  assert.equal(ecdsaRaw(new Uint8Array([...seq(int([1]), int([2])), 0]), 32), null, "trailing");
  assert.equal(ecdsaRaw(seq(int([0x80]), int([2])), 32), null, "negative");
  assert.equal(ecdsaRaw(seq(int([0, 1]), int([2])), 32), null, "leading zero not needed");
  assert.equal(ecdsaRaw(seq(int(new Array(33).fill(1)), int([2])), 32), null, "r too long");
  assert.equal(ecdsaRaw(seq(int([1])), 32), null, "no s");
  assert.equal(ecdsaRaw(seq(int([1]), [0x02, 0x00]), 32), null, "empty s");
  assert.equal(ecdsaRaw(new Uint8Array([0x30, 0x82, 0, 6, ...int([1]), ...int([2])]), 32), null);
  assert.equal(ecdsaRaw(new Uint8Array(), 32), null);
});

Deno.test("ecdsaRaw: any bytes answer null or 2 × size bytes, never throw", () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 120 }), fc.constantFrom(32, 48), (b, size) => {
      const r = ecdsaRaw(b, size);
      return r === null || r.length === 2 * size;
    }),
    { numRuns: Number(Deno.env.get("FUZZ_RUNS") ?? 2000) },
  );
});
