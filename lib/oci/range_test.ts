import assert from "node:assert/strict";
import { parseContentLength, parseContentRange, resolveRange } from "./range.ts";

Deno.test("resolveRange follows SPEC §Blobs rules 1-7", () => {
  const cases: [string | null, number, ReturnType<typeof resolveRange>][] = [
    [null, 10, { kind: "full" }],
    ["bytes=2-4", 10, { kind: "partial", start: 2, end: 4 }], // 1
    ["bytes=2-400", 10, { kind: "partial", start: 2, end: 9 }], // 1: end clamped
    ["bytes=3-", 10, { kind: "partial", start: 3, end: 9 }], // 2
    ["bytes=-4", 10, { kind: "partial", start: 6, end: 9 }], // 3
    ["bytes=-40", 10, { kind: "partial", start: 0, end: 9 }], // 3: longer than blob
    ["bytes=0-1,3-4", 10, { kind: "full" }], // 4
    ["items=0-1", 10, { kind: "full" }], // 5: unknown unit
    ["0-1", 10, { kind: "full" }], // 5: missing unit
    ["bytes=a-b", 10, { kind: "full" }], // 5: non-numeric
    ["bytes=5-2", 10, { kind: "full" }], // 5: inverted
    ["bytes=-", 10, { kind: "full" }],
    ["bytes=10-", 10, { kind: "unsatisfiable" }], // 6: start at length
    ["bytes=11-20", 10, { kind: "unsatisfiable" }], // 6: start beyond
    ["bytes=-0", 10, { kind: "unsatisfiable" }], // 6: zero suffix
    ["bytes=0-0", 0, { kind: "full" }], // 7: empty blob
    ["bytes=-0", 0, { kind: "full" }], // 7
    ["bytes=99999999999999999999-", 10, { kind: "full" }], // unreadable number
  ];
  for (const [h, size, want] of cases) {
    assert.deepEqual(resolveRange(h, size), want, `${h} of ${size}`);
  }
});

Deno.test("parseContentRange takes <start>-<end> without a unit", () => {
  assert.deepEqual(parseContentRange("0-99"), { start: 0, end: 99 });
  assert.deepEqual(parseContentRange(" 5-5 "), { start: 5, end: 5 });
  assert.equal(parseContentRange("bytes=0-99"), null);
  assert.equal(parseContentRange("bytes 0-99/100"), null);
  assert.equal(parseContentRange("9-3"), null);
  assert.equal(parseContentRange("-3"), null);
  assert.equal(parseContentRange("1234567890123456-1234567890123457"), null);
});

Deno.test("parseContentLength rejects anything but a decimal", () => {
  assert.equal(parseContentLength("0"), 0);
  assert.equal(parseContentLength("1024"), 1024);
  for (const bad of ["-1", "1e3", "0x10", "", "12a", "1.5"]) {
    assert.equal(parseContentLength(bad), null, bad);
  }
});
