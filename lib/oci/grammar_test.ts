import assert from "node:assert/strict";
import {
  bareMediaType,
  isMediaType,
  isValidName,
  isValidTag,
  isValidUuid,
  parseDigest,
} from "./grammar.ts";

Deno.test("names follow the distribution grammar", () => {
  for (const ok of ["a", "library/alpine", "a.b_c__d-e--f/g0", "x/y/z", "a".repeat(255)]) {
    assert.ok(isValidName(ok), ok);
  }
  for (
    const bad of [
      "",
      "A",
      "a//b",
      "/a",
      "a/",
      "a..b",
      "a/-b",
      "_svc",
      "a".repeat(256),
      "a b",
      "a%2Fb",
      "é",
    ]
  ) {
    assert.ok(!isValidName(bad), bad);
  }
});

Deno.test("tags are at most 128 chars of [A-Za-z0-9_.-], not starting with . or -", () => {
  for (const ok of ["latest", "v1.0", "_x", "A-b_c.d", "a".repeat(128)]) {
    assert.ok(isValidTag(ok), ok);
  }
  for (const bad of ["", ".x", "-x", "a".repeat(129), "a:b", "a/b", "a b"]) {
    assert.ok(!isValidTag(bad), bad);
  }
});

Deno.test("digests are sha256 or sha512 with lower-case hex of the right length", () => {
  const h256 = "a".repeat(64);
  const h512 = "b".repeat(128);
  assert.deepEqual(parseDigest(`sha256:${h256}`), {
    algorithm: "sha256",
    hex: h256,
    value: `sha256:${h256}`,
  });
  assert.equal(parseDigest(`sha512:${h512}`)?.algorithm, "sha512");
  for (
    const bad of [
      `sha256:${h256.toUpperCase()}`,
      `sha256:${h512}`,
      `sha512:${h256}`,
      `md5:${h256}`,
      h256,
      `sha256:`,
      `sha256:${h256}x`,
    ]
  ) {
    assert.equal(parseDigest(bad), null, bad);
  }
});

Deno.test("media types and uuids", () => {
  assert.ok(isMediaType("application/vnd.oci.image.manifest.v1+json"));
  assert.ok(!isMediaType("application"));
  assert.ok(!isMediaType("a/b/c"));
  assert.equal(bareMediaType("Application/JSON; charset=utf-8"), "application/json");
  assert.ok(isValidUuid(crypto.randomUUID()));
  assert.ok(!isValidUuid("not-a-uuid"));
});
