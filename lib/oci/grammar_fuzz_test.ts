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
