import assert from "node:assert/strict";
import { merge, take, tokensLeft } from "./gcra.ts";

const B = { periodMs: 1000, capacity: 3 };

Deno.test("a full bucket gives capacity tokens at once, then one per period", () => {
  let tat = 0;
  const now = 1_000_000;
  const left: number[] = [];
  for (let i = 0; i < 3; i++) {
    const v = take(B, tat, now);
    assert.ok(v.ok);
    tat = v.tat;
    left.push(v.remaining);
  }
  assert.deepEqual(left, [2, 1, 0]);
  const refused = take(B, tat, now);
  assert.equal(refused.ok, false);
  assert.equal(refused.retryAfterMs, 1000);
  assert.equal(refused.tat, tat, "a refusal takes nothing");
  assert.equal(take(B, tat, now + 999).ok, false);
  const later = take(B, tat, now + 1000);
  assert.ok(later.ok);
  assert.equal(later.remaining, 0);
  assert.equal(tokensLeft(B, tat, now + 3000), 3, "refilled, never above capacity");
  assert.equal(tokensLeft(B, tat, now + 60_000), 3);
});

Deno.test("merge charges other processes' takes and never goes below the local view", () => {
  // Nobody else wrote: the local view (stored + own takes) wins.
  assert.equal(merge(5000, 7000, 2, 1000), 7000);
  // Another process took 3 meanwhile (stored moved 5000 → 8000): both counted.
  assert.equal(merge(8000, 7000, 2, 1000), 10_000);
});
