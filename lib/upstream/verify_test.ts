import assert from "node:assert/strict";
import { digestBytes } from "../streams/mod.ts";
import { manifestDigest, namesOtherContent } from "./verify.ts";

const bytes = new TextEncoder().encode('{"schemaVersion":2}');
const s256 = digestBytes("sha256", bytes);
const s512 = digestBytes("sha512", bytes);
const other256 = digestBytes("sha256", new TextEncoder().encode("other"));

Deno.test("manifestDigest: a digest reference, or a tag's sha256 checked against the header", () => {
  assert.deepEqual(manifestDigest(bytes, s256, null), { digest: s256 });
  assert.deepEqual(manifestDigest(bytes, s512, null), { digest: s512 });
  assert.deepEqual(manifestDigest(bytes, s256, other256), { digest: s256 }, "the bytes decide");
  assert.deepEqual(manifestDigest(bytes, other256, null), { expected: other256, actual: s256 });
  assert.deepEqual(manifestDigest(bytes, "v1", null), { digest: s256 });
  assert.deepEqual(manifestDigest(bytes, "v1", s512), { digest: s256 });
  assert.deepEqual(manifestDigest(bytes, "v1", other256), { expected: other256, actual: s256 });
});

Deno.test("namesOtherContent: comparable only within one algorithm", () => {
  assert.equal(namesOtherContent(s256, s256), false);
  assert.equal(namesOtherContent(s256, other256), true);
  assert.equal(namesOtherContent(s256, s512), false);
  assert.equal(namesOtherContent(s256, "sha256:bad"), false);
});
