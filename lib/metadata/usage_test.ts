import assert from "node:assert/strict";
import { openTestKv, racingKv } from "../../tests/helpers/kv.ts";
import { commitRetryCounts, K, type LinkRecord } from "../kv/mod.ts";
import { UsageMeta, usageValue } from "./usage.ts";

const REPO = "team";
const digest = (i: number) => `sha256:${i.toString(16).padStart(64, "0")}`;

/** 25 linked blobs of 10 bytes whose qref entries all drifted: a repair of three commits. */
async function drifted(kv: Deno.Kv): Promise<void> {
  for (let i = 0; i < 25; i++) {
    await kv.set(K.link(REPO, digest(i)), { size: 10, at: 1 } satisfies LinkRecord);
    await kv.set(K.qref(REPO, digest(i)), new Deno.KvU64(7n));
  }
  await kv.set(K.usage(REPO), new Deno.KvU64(3n));
}

async function qrefCounts(kv: Deno.Kv): Promise<number[]> {
  const out: number[] = [];
  for await (const e of kv.list({ prefix: K.qrefsOf(REPO) })) out.push(usageValue(e));
  return out;
}

Deno.test("a recount repairs drift too large for one commit, in batches", async () => {
  const t = await openTestKv();
  try {
    await drifted(t.kv);
    const r = await new UsageMeta(t.kv).recount(REPO, [REPO], false);
    assert.deepEqual(r, { repository: REPO, stored: 3, actual: 250, refsFixed: 25, settled: true });
    assert.equal(usageValue(await t.kv.get(K.usage(REPO))), 250);
    assert.deepEqual(await qrefCounts(t.kv), Array(25).fill(1));
    assert.deepEqual(t.violations, []);
  } finally {
    await t.close();
  }
});

Deno.test("a writer between two repair commits makes the recount start over", async () => {
  const t = await openTestKv();
  try {
    await drifted(t.kv);
    // The first repair commit goes through; before the second, a writer moves one of its qrefs.
    const racing = racingKv(
      t.kv,
      (n) => n === 2 ? t.kv.set(K.qref(REPO, digest(12)), new Deno.KvU64(9n)) : undefined,
    ).kv;
    const before = commitRetryCounts().get("usage.recount")?.conflicts ?? 0;
    const r = await new UsageMeta(racing).recount(REPO, [REPO], false);
    assert.equal(r.settled, true);
    assert.equal(commitRetryCounts().get("usage.recount")?.conflicts, before + 1);
    assert.equal(usageValue(await t.kv.get(K.usage(REPO))), 250);
    assert.deepEqual(await qrefCounts(t.kv), Array(25).fill(1));
  } finally {
    await t.close();
  }
});

Deno.test("a recount that meets a writer on every attempt reports itself unsettled", async () => {
  const t = await openTestKv();
  try {
    await drifted(t.kv);
    const racing = racingKv(t.kv, () => t.kv.atomic().sum(K.usage(REPO), 1n).commit()).kv;
    const r = await new UsageMeta(racing).recount(REPO, [REPO], false);
    assert.equal(r.settled, false);
    assert.equal(r.actual, 250);
    // Nothing of the repair landed: every first commit checked the total a writer had moved.
    assert.deepEqual(await qrefCounts(t.kv), Array(25).fill(7));
  } finally {
    await t.close();
  }
});
