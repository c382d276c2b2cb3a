// Property fuzzing of the name, tag, digest and media type grammar: every request path uses it.
import assert from "node:assert/strict";
import {
  bareMediaType,
  isMediaType,
  isValidName,
  isValidTag,
  parseDigest,
  requireDigest,
  requireName,
  truncate,
} from "./grammar.ts";
import { RegistryError } from "./errors.ts";
import { expectOnly, FAST_MS, fc, fuzzParams, withinSync } from "../../tests/helpers/fuzz.ts";

const component = fc.stringMatching(/^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*$/);

Deno.test("fuzz grammar: names built from the grammar are valid, digests round-trip", () => {
  fc.assert(
    fc.property(
      fc.array(component, { minLength: 1, maxLength: 5 }),
      fc.constantFrom("sha256", "sha512"),
      fc.uint8Array({ minLength: 64, maxLength: 64 }),
      (parts, alg, bytes) => {
        const name = parts.join("/");
        assert.equal(isValidName(name), name.length <= 255);
        const h = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")
          .slice(0, alg === "sha256" ? 64 : 128);
        const d = parseDigest(`${alg}:${h}`);
        assert.deepEqual(d, { algorithm: alg, hex: h, value: `${alg}:${h}` });
      },
    ),
    fuzzParams(),
  );
});

Deno.test("fuzz grammar: any string is judged fast, and only RegistryError is thrown", () => {
  const s = fc.oneof(
    fc.string({ maxLength: 300 }),
    fc.stringMatching(/^[a-z0-9._\/-]{0,300}$/),
    fc.tuple(component, fc.constantFrom("-", "_", "__", ".", "/"), fc.nat(5000)).map((
      [c, sep, n],
    ) => (c + sep).repeat(n % 200) + "!"),
  );
  fc.assert(
    fc.property(s, (x) => {
      withinSync(FAST_MS / 10, "grammar", () => {
        isValidName(x);
        isValidTag(x);
        isMediaType(x);
        bareMediaType(x);
        parseDigest(x);
        for (const f of [() => requireDigest(x), () => requireName(x)]) {
          try {
            f();
          } catch (e) {
            expectOnly(e, RegistryError);
            assert.ok((e as Error).message.length < 300);
          }
        }
      });
      assert.ok(truncate(x).length <= 129);
    }),
    fuzzParams(),
  );
});

Deno.test("fuzz grammar: near-miss names of maximal ambiguity stay linear", () => {
  // separators that the name regex may split many ways, ending in a character that fails it
  for (const unit of ["a-", "a--", "a_", "a.", "a__", "a/"]) {
    const s = unit.repeat(100_000) + "A";
    withinSync(FAST_MS, `name ${unit}`, () => isValidName(s.slice(0, 255)) || isValidName(s));
  }
  const mt = "a/" + "a".repeat(100_000) + "\u0000";
  withinSync(FAST_MS, "media type", () => isMediaType(mt));
});

Deno.test("fuzz grammar: names, tags and digests agree with the distribution spec's regexes", () => {
  // written out from the OCI distribution spec, independently of grammar.ts
  const SPEC_NAME = /^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(\/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$/;
  const SPEC_TAG = /^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$/;
  const SPEC_DIGEST = /^(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$/;
  const ch = fc.constantFrom(..."az09._-/A:%@ é\n".split(""));
  const s = fc.oneof(
    fc.array(ch, { maxLength: 40 }).map((c) => c.join("")),
    fc.array(component, { minLength: 1, maxLength: 4 }).map((p) => p.join("/")),
    fc.tuple(component, fc.constantFrom("", "/", "//", "_", "___", ".", "..", "-"), component)
      .map(([a, sep, b]) => a + sep + b),
    fc.nat(300).map((n) => "a".repeat(n)),
    fc.tuple(fc.constantFrom("sha256:", "sha512:", "SHA256:", "sha384:"), fc.nat(130))
      .map(([alg, n]) => alg + "0123456789abcdef".repeat(9).slice(0, n)),
    fc.string({ maxLength: 40 }),
  );
  fc.assert(
    fc.property(s, (x) => {
      assert.equal(isValidName(x), x.length <= 255 && SPEC_NAME.test(x), JSON.stringify(x));
      assert.equal(isValidTag(x), SPEC_TAG.test(x), JSON.stringify(x));
      assert.equal(parseDigest(x) !== null, SPEC_DIGEST.test(x), JSON.stringify(x));
      if (isValidName(x)) assert.equal(requireName(x), x);
    }),
    fuzzParams(),
  );
});
