// The remembered certificate checks answer exactly what a fresh check would: per pair of
// certificates (bytes, not names), for a wrong issuer as for the right one, and certificates
// compare by their bytes.
import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { X509Certificate } from "@sigstore/core";
import { notationChain } from "../../tests/helpers/signing.ts";
import "./cert_memo.ts";

const parse = (der: Uint8Array) => X509Certificate.parse(Buffer.from(der));

Deno.test("cert memo: each (certificate, issuer) pair keeps its own answer", async () => {
  const a = await notationChain("CN=a");
  const b = await notationChain("CN=a"); // the same names, other keys: must not be confused
  const [leafA, rootA] = a.chain.map(parse);
  const [leafB, rootB] = b.chain.map(parse);
  for (let round = 0; round < 3; round++) {
    assert.equal(leafA.verify(rootA), true, `round ${round}: its issuer`);
    assert.equal(leafA.verify(rootB), false, `round ${round}: a root of the same name`);
    assert.equal(leafB.verify(rootB), true);
    assert.equal(leafB.verify(rootA), false);
    assert.equal(rootA.verify(), true, "self-signed");
    assert.equal(leafA.verify(), false, "not self-signed");
  }
  // a fresh parse of the same bytes is the same certificate; other bytes are not
  const again = parse(a.chain[0]);
  assert.equal(again.equals(leafA), true);
  assert.equal(leafA.equals(leafB), false);
  assert.equal(again.verify(rootA), true);
});

Deno.test("cert memo: a tampered signature does not borrow the original's answer", async () => {
  const a = await notationChain("CN=t");
  const [leaf, root] = a.chain.map(parse);
  assert.equal(leaf.verify(root), true);
  const bytes = Uint8Array.from(a.chain[0]);
  bytes[bytes.length - 2] ^= 0x01; // inside the signature value
  const forged = parse(bytes);
  assert.equal(forged.equals(leaf), false);
  assert.equal(forged.verify(root), false);
});
