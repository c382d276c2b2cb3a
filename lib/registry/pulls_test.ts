import { openTestKv } from "../../tests/helpers/kv.ts";
import assert from "node:assert/strict";
import { defaultConfig } from "../config/schema.ts";
import { PullMeta } from "../metadata/mod.ts";
import { Pulls } from "./pulls.ts";

const D = `sha256:${"c".repeat(64)}`;

async function withPulls(on: boolean, fn: (p: Pulls, meta: PullMeta) => Promise<void>) {
  const t = await openTestKv();
  const kv = t.kv;
  const cfg = defaultConfig();
  cfg.global.updatePullTime = on;
  cfg.global.maxAgeSecs = on ? 3600 : null;
  const meta = new PullMeta(kv);
  try {
    await fn(new Pulls(cfg, meta), meta);
    assert.deepEqual(t.violations, []);
  } finally {
    await t.close();
  }
}

Deno.test("pulls recorded in a burst are all written, and listed by the same process", async () => {
  await withPulls(true, async (pulls, meta) => {
    for (let i = 0; i < 1200; i++) pulls.record("a", "v1", D, i % 2 ? "alice" : "anonymous");
    const page = await pulls.list("a", "v1", 0, 5000);
    assert.equal(page.entries.length, 1000, "a page is capped at PULLS_MAX_N");
    assert.equal(page.next, 1000);
    assert.equal(page.max_age_secs, 3600);
    assert.equal((await pulls.list("a", "v1", 1000, 5000)).entries.length, 200);
    assert.ok((await meta.lastPulled("a", D))! <= Date.now());
    await pulls.settled(); // nothing queued: resolves at once
  });
});

Deno.test("with update_pull_time off nothing is written or listed", async () => {
  await withPulls(false, async (pulls, meta) => {
    pulls.record("a", "v1", D, "alice");
    await pulls.settled();
    assert.deepEqual(await meta.page("a", "v1", 0, 10), { entries: [], more: false });
    assert.equal(await meta.lastPulled("a", D), null);
    assert.deepEqual(await pulls.list("a", "v1", 0, 10), {
      target: "v1",
      max_pulls: 1000,
      entries: [],
    });
  });
});
