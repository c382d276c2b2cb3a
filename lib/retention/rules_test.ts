import assert from "node:assert/strict";
import { type ImageFacts, RetentionCompileError, RetentionRules } from "./rules.ts";

const NOW = Date.parse("2026-06-30T00:00:00Z");
const DAY = 86_400_000;

function img(over: Partial<ImageFacts> = {}): ImageFacts {
  return {
    tag: "v1",
    digest: "sha256:" + "a".repeat(64),
    namespace: "team/app",
    pushedAt: NOW - 10 * DAY,
    lastPulledAt: 0,
    pushedRank: 5,
    pulledRank: 5,
    ...over,
  };
}

const rules = (...r: string[]) =>
  RetentionRules.compile({ rules: r, where: "global.retention_policy" });

Deno.test("days(), hours() and now() compare with push and pull times", () => {
  const r = rules("image.pushed_at > now() - days(7)");
  assert.equal(r.judge(img({ pushedAt: NOW - 6 * DAY }), NOW).keep, true);
  assert.equal(r.judge(img({ pushedAt: NOW - 8 * DAY }), NOW).keep, false);
  const h = rules("image.last_pulled_at > now() - hours(36)");
  assert.equal(h.judge(img({ lastPulledAt: NOW - 35 * 3600_000 }), NOW).keep, true);
  assert.equal(h.judge(img({ lastPulledAt: NOW - 37 * 3600_000 }), NOW).keep, false);
  assert.equal(h.judge(img({ lastPulledAt: 0 }), NOW).keep, false, "never pulled: the epoch");
});

Deno.test("top_pushed and top_pulled read the image's rank", () => {
  const r = rules("top_pushed(3)", "top_pulled(1)");
  assert.deepEqual(r.judge(img({ pushedRank: 2 }), NOW), { keep: true, rule: 0, errors: [] });
  assert.equal(r.judge(img({ pushedRank: 3 }), NOW).keep, false);
  assert.deepEqual(r.judge(img({ pulledRank: 0 }), NOW), { keep: true, rule: 1, errors: [] });
});

Deno.test("tag and namespace rules; an erroring or non-bool rule keeps (fail-open)", () => {
  const r = rules('image.tag == "latest" || image.tag.startsWith("release-")');
  assert.equal(r.judge(img({ tag: "latest" }), NOW).keep, true);
  assert.equal(r.judge(img({ tag: "release-1" }), NOW).keep, true);
  assert.equal(r.judge(img({ tag: "dev" }), NOW).keep, false);
  const bad = rules("image.nope == 1", "false");
  const v = bad.judge(img(), NOW);
  assert.equal(v.keep, true);
  assert.equal(v.errors.length, 1);
  assert.equal(v.errors[0].rule, 0);
  const nb = rules('"yes"').judge(img(), NOW);
  assert.equal(nb.keep, true);
  assert.match(nb.errors[0].error, /not a bool/);
});

Deno.test("no rules keep everything; syntax errors name the rule; pull-time rules are spotted", () => {
  assert.equal(rules().judge(img(), NOW).keep, true);
  assert.throws(
    () => rules("true", "image.tag =="),
    (e) =>
      e instanceof RetentionCompileError && /global\.retention_policy\.rules\[1\]/.test(e.message),
  );
  assert.equal(rules("top_pulled(2)").readsPullTimes(), true);
  assert.equal(rules("image.last_pulled_at > now() - days(1)").readsPullTimes(), true);
  assert.equal(rules("top_pushed(2)").readsPullTimes(), false);
});
