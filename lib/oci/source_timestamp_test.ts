// X-Svc-Source-Timestamp to the microsecond: what replication sends is what the receiver reads
// back, exactly; SPEC's rules 1 (RFC 3339 or nothing) and 6 (future → now) hold; the clock the
// times come from never repeats a value.
import assert from "node:assert/strict";
import fc from "fast-check";
import { eventTime, formatSourceTimestamp, parseSourceTimestamp } from "./source_timestamp.ts";

Deno.test("source timestamps: sent to the microsecond and read back exactly", () => {
  const t = Date.parse("2026-11-28T21:23:19.123Z") + 0.456;
  assert.equal(formatSourceTimestamp(t), "2026-11-28T21:23:19.123456Z");
  assert.equal(parseSourceTimestamp("2026-11-28T21:23:19.123456Z"), t);
  assert.equal(
    formatSourceTimestamp(Date.parse("2001-01-01T00:00:00Z")),
    "2001-01-01T00:00:00.000000Z",
  );
  fc.assert(
    fc.property(fc.integer({ min: 0, max: Date.now() * 1000 }), (us) => {
      const ms = us / 1000;
      const back = parseSourceTimestamp(formatSourceTimestamp(ms));
      return back !== null && Math.round(back * 1000) === us;
    }),
  );
});

Deno.test("source timestamps: any RFC 3339 form other senders use; anything else is null", () => {
  const at = Date.parse("2026-01-02T03:04:05Z");
  assert.equal(parseSourceTimestamp("2026-01-02T03:04:05Z"), at);
  assert.equal(parseSourceTimestamp(" 2026-01-02t03:04:05z "), at);
  assert.equal(parseSourceTimestamp("2026-01-02 03:04:05Z"), at);
  assert.equal(parseSourceTimestamp("2026-01-02T05:04:05+02:00"), at);
  assert.equal(parseSourceTimestamp("2026-01-02T03:04:05.5Z"), at + 500);
  // more than microseconds: the rest is dropped, not rounded up into the next microsecond
  assert.equal(parseSourceTimestamp("2026-01-02T03:04:05.000001999Z"), at + 0.001);
  for (
    const bad of [
      "",
      "yesterday",
      "2026-01-02",
      "2026-01-02T03:04:05",
      "1700000000",
      "2026-13-40T99:99:99Z",
      "2026-01-02T03:04:05.Z",
    ]
  ) {
    assert.equal(parseSourceTimestamp(bad), null, bad);
  }
  assert.equal(parseSourceTimestamp(null), null);
  // rule 6: a future time is now
  assert.equal(parseSourceTimestamp("2999-01-01T00:00:00Z", 1_000), 1_000);
});

Deno.test("source timestamps: any header value is null or a time no later than now", () => {
  fc.assert(
    fc.property(fc.string({ maxLength: 64 }), (v) => {
      const t = parseSourceTimestamp(v, 1_795_000_000_000);
      return t === null || (Number.isFinite(t) && t <= 1_795_000_000_000);
    }),
    { numRuns: Number(Deno.env.get("FUZZ_RUNS") ?? 2000) },
  );
});

Deno.test("eventTime: the wall clock to the microsecond, never the same value twice", () => {
  let last = 0;
  for (let i = 0; i < 100_000; i++) {
    const t = eventTime();
    assert.ok(t > last, `${t} after ${last}`);
    last = t;
  }
  assert.ok(Math.abs(eventTime() - Date.now()) < 1000);
  assert.equal(Math.round(last * 1000) / 1000, last, "whole microseconds");
});
