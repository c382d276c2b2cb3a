// Property fuzzing of the WWW-Authenticate parser: upstream registries write these headers.
import assert from "node:assert/strict";
import { ChallengeSyntaxError, parseChallenges } from "./challenge.ts";
import {
  assertLinear,
  expectOnly,
  FAST_MS,
  fc,
  fuzzParams,
  mutatedText,
  withinSync,
} from "../../tests/helpers/fuzz.ts";

const token = fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,12}$/);
const quotedValue = fc.string({ maxLength: 20 });
const quote = (s: string) => `"${s.replace(/["\\]/g, (c) => `\\${c}`)}"`;

function check(h: string): void {
  try {
    const out = withinSync(FAST_MS, "parseChallenges", () => parseChallenges(h));
    assert.ok(out.length >= 1 && out.length <= h.length);
    for (const c of out) assert.equal(c.scheme, c.scheme.toLowerCase());
  } catch (e) {
    expectOnly(e, ChallengeSyntaxError);
  }
}

Deno.test("fuzz www-authenticate: challenges written from parts parse back", () => {
  const challenge = fc.record({
    scheme: token.filter((t) => /^[A-Za-z]/.test(t)),
    params: fc.uniqueArray(
      fc.tuple(
        token,
        fc.oneof(
          // a bare value ending in "=" would read as a token68 (RFC 7235's own ambiguity)
          fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,11}$/).map((v) => [v, false] as const),
          quotedValue.map((v) => [v, true] as const),
        ),
      ).map(([k, [v, q]]) => [k, v, q] as [string, string, boolean]),
      {
        maxLength: 4,
        selector: ([k]) => k.toLowerCase(),
      },
    ),
  });
  fc.assert(
    fc.property(fc.array(challenge, { minLength: 1, maxLength: 3 }), (cs) => {
      // a challenge without params would read the next scheme as its token68: give each one
      const filled = cs.map((c) => ({
        ...c,
        params: c.params.length ? c.params : [["realm", "r", true] as [string, string, boolean]],
      }));
      const h = filled.map((c) =>
        `${c.scheme} ${c.params.map(([k, v, q]) => `${k}=${q ? quote(v) : v}`).join(", ")}`
      ).join(", ");
      const got = parseChallenges(h);
      assert.deepEqual(
        got.map((c) => [c.scheme, c.params]),
        filled.map((c) => [
          c.scheme.toLowerCase(),
          Object.fromEntries(c.params.map(([k, v]) => [k.toLowerCase(), v])),
        ]),
        h,
      );
    }),
    fuzzParams(),
  );
});

Deno.test("fuzz www-authenticate: any header parses or throws ChallengeSyntaxError, fast", () => {
  const sample =
    'Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:library/alpine:pull", Basic realm="x", Negotiate abc==';
  fc.assert(
    fc.property(fc.oneof(fc.string({ maxLength: 200 }), mutatedText(sample, 10)), check),
    fuzzParams(),
  );
});

Deno.test("fuzz www-authenticate: long headers stay linear", () => {
  const many = "Bearer " + Array.from({ length: 20_000 }, (_, i) => `k${i}=v`).join(", ");
  check(many);
  check("Basic " + "a".repeat(200_000) + " x");
  check("Bearer realm=" + '"' + "\\a".repeat(100_000));
  check("a, ".repeat(50_000));
  check("Bearer " + "k = v , ".repeat(30_000));
});

Deno.test("fuzz www-authenticate: a megabyte header of any shape parses in linear time", async () => {
  const parse = (h: string) => {
    try {
      parseChallenges(h);
    } catch (e) {
      expectOnly(e, ChallengeSyntaxError);
    }
  };
  const shapes: [string, (n: number) => string][] = [
    // a quoted value was copied a character at a time: a 1 MB realm cost ~100 × a 64 KB one
    ["quoted", (n) => 'Bearer realm="' + "x".repeat(n) + '"'],
    ["escapes", (n) => 'Bearer realm="' + "\\x".repeat(n / 2) + '"'],
    ["unterminated", (n) => 'Bearer realm="' + "x".repeat(n)],
    ["params", (n) => "Bearer " + "k=v, ".repeat(n / 5)],
    ["schemes", (n) => "a, ".repeat(n / 3)],
    ["token68", (n) => "Basic " + "a".repeat(n) + " x"],
    ["spaces", (n) => "Bearer" + " ".repeat(n) + "x"],
    ["separators", (n) => "Bearer k=v" + ", ".repeat(n / 2) + "x"],
    ["token after comma", (n) => "Bearer k=v, " + "a".repeat(n) + " x"],
  ];
  for (const [what, make] of shapes) await assertLinear(`WWW-Authenticate ${what}`, make, parse);
});

Deno.test("fuzz www-authenticate: parameters named like Object.prototype keys are parameters", () => {
  const key = fc.constantFrom("__proto__", "constructor", "toString", "hasOwnProperty", "valueOf");
  fc.assert(
    fc.property(fc.uniqueArray(key, { minLength: 1, maxLength: 5 }), quotedValue, (keys, v) => {
      const h = `Bearer ${keys.map((k) => `${k}=${quote(v)}`).join(", ")}`;
      const [c] = parseChallenges(h);
      // names compare case-insensitively and are lower-cased: `__proto__` and `constructor` stay
      const names = keys.map((k) => k.toLowerCase());
      assert.deepEqual(Object.keys(c.params), names);
      for (const k of names) assert.equal(Object.getOwnPropertyDescriptor(c.params, k)?.value, v);
      assert.equal(Object.getPrototypeOf(c.params), Object.prototype, "the prototype is untouched");
      // a key not sent reads as absent, never as an inherited function
      for (const k of ["realm", "service", "scope"]) {
        assert.equal(Object.hasOwn(c.params, k), false);
      }
    }),
    fuzzParams(),
  );
});
