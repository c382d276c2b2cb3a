// Property fuzzing of the one query reader (routes/query.ts): whatever a client writes after the
// `?` (repeated keys, empty values, malformed percent-encoding, any bytes), each reader answers
// as documented or refuses with the endpoint's own RegistryError, in linear time.
import assert from "node:assert/strict";
import { extensionQueryError, Query } from "./query.ts";
import { RegistryError } from "../lib/oci/mod.ts";
import { assertLinear, expectOnly, fc, fuzzParams } from "../tests/helpers/fuzz.ts";

const ociError = (d: string) => new RegistryError("UNSUPPORTED", d);

/** The query of a request as the app reads it: through the URL parser. */
const queryOf = (raw: string) => new URL(`http://registry.example/v2/_catalog?${raw}`).searchParams;

const key = fc.constantFrom("n", "last", "tag", "from", "to", "mount", "ns", "x", "", "N");
const value = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.stringMatching(/^\d{0,20}$/),
  fc.constantFrom("0", "1", "007", "1e3", "-1", "+1", " 1", "1 ", "0x10", "٣", "Infinity"),
);
/** raw query text: encoded pairs, with malformed escapes and separators mixed in */
const rawPiece = fc.oneof(
  fc.tuple(key, value).map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`),
  fc.constantFrom("%", "%z", "%zz", "%e9", "%c3%28", "%ff%fe", "%00", "+", "&", "=", "==", "a=b=c"),
  fc.constantFrom("%F0%9F%92%A9", "%ed%a0%80", "n", "n=", "=1", "tag=%20", "n=%31"),
  fc.string({ maxLength: 10 }),
);
const rawQuery = fc.array(rawPiece, { maxLength: 10 }).map((ps) => ps.join("&"));

/** Runs `f`; a RegistryError must be the one `bad` makes, anything else fails the property. */
function refusedAs<T>(code: string, f: () => T): T | RegistryError {
  try {
    return f();
  } catch (e) {
    expectOnly(e, RegistryError);
    const err = e as RegistryError;
    assert.equal(err.code, code);
    assert.ok(err.detail.length < 200, "a bounded detail");
    return err;
  }
}

Deno.test("fuzz query: any query text is read or refused with the endpoint's error", () => {
  fc.assert(
    fc.property(
      fc.oneof(
        rawQuery,
        fc.string({ maxLength: 100 }),
        fc.string({ unit: "binary", maxLength: 60 }),
      ),
      key,
      fc.boolean(),
      (raw, name, strict) => {
        const params = queryOf(raw);
        const all = params.getAll(name);
        for (
          const [q, code] of [
            [new Query(params), "NAME_UNKNOWN"],
            [new Query(params).refusing(ociError, strict), "UNSUPPORTED"],
          ] as const
        ) {
          const isStrict = code === "NAME_UNKNOWN" || strict;
          assert.equal(q.first(name), all[0] ?? null);
          assert.deepEqual(q.all(name), all);
          assert.equal(q.has(name), all.length > 0);
          // one(): a repeat is refused when strict, else the first value wins
          const one = refusedAs(code, () => q.one(name));
          if (isStrict && all.length > 1) assert.ok(one instanceof RegistryError);
          else assert.equal(one, all[0] ?? null);
          // count(): the documented digits-only grammar, capped and with its minimum
          const n = refusedAs(
            code,
            () => q.count(name, "fallback", { digits: 9, min: 1, max: 1000 }),
          );
          const v = isStrict && all.length > 1 ? undefined : all[0];
          if (isStrict && all.length > 1) assert.ok(n instanceof RegistryError);
          else if (v === undefined) assert.equal(n, "fallback");
          else if (/^\d{1,9}$/.test(v) && Number(v) >= 1) {
            assert.equal(n, Math.min(Number(v), 1000));
          } else assert.ok(n instanceof RegistryError, `${JSON.stringify(v)} → ${n}`);
          refusedAs(code, () => q.matching(name, /^[a-z]+$/, "letters"));
          refusedAs(code, () => q.atMostOnce([name, "n", "last"]));
          const only = refusedAs(code, () => q.only(["n", "last"]));
          assert.equal(
            only instanceof RegistryError,
            [...params.keys()].some((k) => k !== "n" && k !== "last"),
          );
        }
      },
    ),
    fuzzParams(),
  );
});

Deno.test("fuzz query: values written with encodeURIComponent read back exactly, in order", () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(key, fc.string({ maxLength: 20 })), { maxLength: 8 }),
      (pairs) => {
        // lone surrogates cannot be UTF-8 encoded: encodeURIComponent refuses them
        fc.pre(pairs.every(([, v]) => v.isWellFormed()));
        const raw = pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
          .join("&");
        const q = new Query(queryOf(raw), extensionQueryError, false);
        for (const [k] of pairs) {
          const want = pairs.filter(([kk]) => kk === k).map(([, v]) => v);
          assert.deepEqual(q.all(k), want);
          assert.equal(q.one(k), want[0]);
        }
      },
    ),
    fuzzParams(),
  );
});

Deno.test("fuzz query: malformed percent-encoding is kept as written, never thrown", () => {
  // the URL parser leaves a bad escape as text and reads invalid UTF-8 as U+FFFD
  for (
    const [raw, want] of [
      ["n=%", "%"],
      ["n=%zz", "%zz"],
      ["n=%e9", "\uFFFD"],
      ["n=%c3%28", "\uFFFD("],
      ["n=%ed%a0%80", "\uFFFD\uFFFD\uFFFD"],
      ["n=a+b", "a b"],
      ["n", ""],
      ["n=", ""],
    ]
  ) {
    const q = new Query(queryOf(raw));
    assert.equal(q.one("n"), want, raw);
    assert.throws(() => q.count("n", 0), RegistryError, raw);
  }
});

Deno.test("fuzz query: a megabyte query reads in linear time", async () => {
  const read = (raw: string) => {
    const q = new Query(queryOf(raw));
    for (const name of ["n", "last", "tag"]) {
      try {
        q.one(name);
      } catch (e) {
        expectOnly(e, RegistryError);
      }
    }
    q.all("tag");
    try {
      q.atMostOnce(["n", "last"]);
      q.only(["n", "last", "tag"]);
    } catch (e) {
      expectOnly(e, RegistryError);
    }
  };
  const shapes: [string, (n: number) => string][] = [
    ["repeated tag", (n) => "tag=v1&".repeat(n / 7)],
    ["distinct keys", (n) => Array.from({ length: n / 8 }, (_, i) => `k${i}=1`).join("&")],
    ["escapes", (n) => "n=" + "%zz".repeat(n / 3)],
    ["ampersands", (n) => "&".repeat(n)],
    ["equals", (n) => "n" + "=".repeat(n)],
  ];
  for (const [what, make] of shapes) await assertLinear(`query ${what}`, make, read);
});
