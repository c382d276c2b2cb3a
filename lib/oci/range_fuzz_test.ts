// Property fuzzing of Range, Content-Range and Content-Length headers.
import assert from "node:assert/strict";
import { parseContentLength, parseContentRange, resolveRange } from "./range.ts";
import { FAST_MS, fc, fuzzParams, withinSync } from "../../tests/helpers/fuzz.ts";

const header = fc.oneof(
  fc.string({ maxLength: 60 }),
  fc.tuple(
    fc.constantFrom("bytes=", "BYTES =", " bytes= ", "items=", "bytes="),
    fc.option(fc.nat(), { nil: null }),
    fc.constantFrom("-", " - ", ","),
    fc.option(fc.nat(), { nil: null }),
  ).map(([u, a, d, b]) => `${u}${a ?? ""}${d}${b ?? ""}`),
  fc.bigInt({ min: 0n, max: 10n ** 30n }).map((n) => `bytes=${n}-${n}`),
);

Deno.test("fuzz range: a Range header resolves within the blob or not at all", () => {
  fc.assert(
    fc.property(header, fc.nat(), (h, size) => {
      const r = withinSync(FAST_MS, "resolveRange", () => resolveRange(h, size));
      if (r.kind === "partial") {
        assert.ok(Number.isSafeInteger(r.start) && Number.isSafeInteger(r.end));
        assert.ok(0 <= r.start && r.start <= r.end && r.end < size, JSON.stringify([h, size, r]));
      }
    }),
    fuzzParams(),
  );
});

Deno.test("fuzz range: explicit ranges round-trip", () => {
  fc.assert(
    fc.property(fc.nat(), fc.nat(), fc.integer({ min: 1, max: 2 ** 40 }), (a, len, size) => {
      const r = resolveRange(`bytes=${a}-${a + len}`, size);
      if (a >= size) assert.deepEqual(r, { kind: "unsatisfiable" });
      else assert.deepEqual(r, { kind: "partial", start: a, end: Math.min(a + len, size - 1) });
      assert.deepEqual(parseContentRange(`${a}-${a + len}`), { start: a, end: a + len });
      assert.equal(parseContentLength(String(a)), a);
    }),
    fuzzParams(),
  );
});

Deno.test("fuzz range: Content-Range and Content-Length accept only what they print back", () => {
  fc.assert(
    fc.property(fc.string({ maxLength: 40 }), (s) => {
      const r = parseContentRange(s);
      if (r) {
        assert.equal(
          `${r.start}-${r.end}`,
          s.trim().replace(/^0+(?=\d)/, "").replace(/-0+(?=\d)/, "-"),
        );
        assert.ok(r.start <= r.end && Number.isSafeInteger(r.end));
      }
      const n = parseContentLength(s);
      if (n !== null) assert.ok(Number.isSafeInteger(n) && n >= 0);
    }),
    fuzzParams(),
  );
});

Deno.test("fuzz range: long whitespace runs stay fast", () => {
  const ws = " ".repeat(100_000);
  for (const h of [`bytes${ws}=${ws}1${ws}-`, `bytes=1${ws}-${ws}x`, `${ws}bytes=${ws}`]) {
    withinSync(FAST_MS, "resolveRange", () => resolveRange(h, 10));
    withinSync(FAST_MS, "parseContentRange", () => parseContentRange(h));
  }
});
