import { openTestKv } from "../../tests/helpers/kv.ts";
import assert from "node:assert/strict";
import { defaultConfig } from "../config/schema.ts";
import { K, type PullChunk } from "../kv/mod.ts";
import { CLIENT_MAX, PullMeta, sweepPullHistory } from "./pulls.ts";

const D = `sha256:${"a".repeat(64)}`;
const D2 = `sha256:${"b".repeat(64)}`;

async function withKv(fn: (kv: Deno.Kv, meta: PullMeta) => Promise<void>) {
  const t = await openTestKv();
  try {
    await fn(t.kv, new PullMeta(t.kv));
    assert.deepEqual(t.violations, []);
  } finally {
    await t.close();
  }
}

async function count(kv: Deno.Kv, prefix: Deno.KvKey): Promise<number> {
  let n = 0;
  for await (const _ of kv.list({ prefix })) n++;
  return n;
}

const ats = (entries: { at: number }[]) => entries.map((e) => e.at);

Deno.test("recorded pulls read newest first, paged by offset and n", async () => {
  await withKv(async (_kv, meta) => {
    for (const at of [3, 1, 5, 2, 4]) await meta.record("a/b", "v1", D, `c${at}`, at);
    await meta.record("a/b", "v2", D, "other", 9);
    const all = await meta.page("a/b", "v1", 0, 100);
    assert.deepEqual(ats(all.entries), [5, 4, 3, 2, 1]);
    assert.equal(all.more, false);
    assert.deepEqual(all.entries[0], { client: "c5", at: 5 });
    assert.deepEqual(await meta.page("a/b", "v1", 1, 2), {
      entries: [{ client: "c4", at: 4 }, { client: "c3", at: 3 }],
      more: true,
    });
    assert.deepEqual(ats((await meta.page("a/b", "v1", 3, 2)).entries), [2, 1]);
    assert.equal((await meta.page("a/b", "v1", 3, 2)).more, false);
    assert.deepEqual(await meta.page("a/b", "v1", 9, 2), { entries: [], more: false });
    assert.deepEqual(await meta.page("a/b", "nothing", 0, 2), { entries: [], more: false });
  });
});

Deno.test("two pulls in the same millisecond are both kept; long clients are cut", async () => {
  await withKv(async (_kv, meta) => {
    await meta.record("a", "t", D, "x".repeat(5000), 7);
    await meta.record("a", "t", D, "y", 7);
    const p = await meta.page("a", "t", 0, 10);
    assert.equal(p.entries.length, 2);
    assert.ok(p.entries.every((e) => e.client.length <= CLIENT_MAX));
  });
});

Deno.test("last pull time is an atomic max: a late older pull never moves it back", async () => {
  await withKv(async (_kv, meta) => {
    assert.equal(await meta.lastPulled("a", D), null);
    await meta.record("a", "v1", D, "c", 500);
    await meta.record("a", D, D, "c", 300);
    assert.equal(await meta.lastPulled("a", D), 500);
    assert.equal(await meta.lastPulled("b", D), null, "per namespace");
  });
});

Deno.test("compact folds live pulls into chunks and keeps the newest max_pulls", async () => {
  await withKv(async (kv, meta) => {
    for (let at = 1; at <= 10; at++) await meta.record("a", "v1", D, `c${at}`, at);
    const dry = await meta.compact("a", "v1", { maxPulls: 3, maxAgeSecs: null }, 100, true);
    assert.equal(dry.dropped, 7);
    assert.equal(await count(kv, K.pullsOf("a", "v1")), 10, "a dry run changes nothing");

    const r = await meta.compact("a", "v1", { maxPulls: 3, maxAgeSecs: null }, 100);
    assert.equal(r.dropped, 7);
    assert.equal(r.scanned, 10);
    assert.equal(await count(kv, K.pullsOf("a", "v1")), 0, "live keys folded or dropped");
    assert.equal(await count(kv, K.pullChunksOf("a", "v1")), 1);
    assert.deepEqual(ats((await meta.page("a", "v1", 0, 100)).entries), [10, 9, 8]);

    // New live pulls and compacted ones read as one timeline.
    await meta.record("a", "v1", D, "late", 12);
    await meta.record("a", "v1", D, "late", 11);
    assert.deepEqual(ats((await meta.page("a", "v1", 0, 100)).entries), [12, 11, 10, 9, 8]);
    assert.deepEqual(ats((await meta.page("a", "v1", 1, 2)).entries), [11, 10]);

    const again = await meta.compact("a", "v1", { maxPulls: 3, maxAgeSecs: null }, 100);
    assert.equal(again.dropped, 2);
    assert.deepEqual(ats((await meta.page("a", "v1", 0, 100)).entries), [12, 11, 10]);
    assert.equal(await count(kv, K.pullsOf("a", "v1")), 0);
    const clients = (await meta.page("a", "v1", 0, 100)).entries.map((e) => e.client);
    assert.deepEqual(clients, ["late", "late", "c10"]);
  });
});

Deno.test("max_age_secs drops old entries but the newest always stays", async () => {
  await withKv(async (_kv, meta) => {
    const now = 1_000_000;
    for (const age of [500, 200, 50, 10]) await meta.record("a", "t", D, "c", now - age * 1000);
    const keep = { maxPulls: 100, maxAgeSecs: 60 };
    assert.equal((await meta.compact("a", "t", keep, now)).dropped, 2);
    assert.deepEqual(ats((await meta.page("a", "t", 0, 9)).entries), [now - 10_000, now - 50_000]);
    // Everything is now past the bound: only the newest survives.
    const later = now + 3600_000;
    assert.equal((await meta.compact("a", "t", keep, later)).dropped, 1);
    assert.deepEqual(ats((await meta.page("a", "t", 0, 9)).entries), [now - 10_000]);
    assert.equal((await meta.compact("a", "t", keep, later)).dropped, 0, "idempotent");
  });
});

Deno.test("many kept pulls fold into several chunks, each under the value limit", async () => {
  await withKv(async (kv, meta) => {
    const ops: Promise<void>[] = [];
    for (let at = 1; at <= 500; at++) ops.push(meta.record("a", "t", D, "é".repeat(300), at));
    await Promise.all(ops);
    const r = await meta.compact("a", "t", { maxPulls: 450, maxAgeSecs: null }, 1000);
    assert.equal(r.dropped, 50);
    assert.equal(await count(kv, K.pullChunksOf("a", "t")), 5);
    const page = await meta.page("a", "t", 0, 1000);
    assert.equal(page.entries.length, 450);
    assert.deepEqual(ats(page.entries).slice(0, 2), [500, 499]);
    assert.equal(page.entries.at(-1)!.at, 51);
    // Trimming compacted chunks rewrites or drops them.
    await meta.compact("a", "t", { maxPulls: 5, maxAgeSecs: null }, 1000);
    assert.deepEqual(ats((await meta.page("a", "t", 0, 9)).entries), [500, 499, 498, 497, 496]);
    assert.equal(await count(kv, K.pullChunksOf("a", "t")), 1);
  });
});

Deno.test("overlapping chunks still read in time order", async () => {
  await withKv(async (kv, meta) => {
    const chunk = (entries: number[]): PullChunk => ({
      entries: entries.map((at) => ({ client: "c", at })),
    });
    await kv.set(K.pullChunk("a", "t", 10, "x"), chunk([10, 6, 2]));
    await kv.set(K.pullChunk("a", "t", 8, "y"), chunk([8, 7, 1]));
    await kv.set(K.pullChunk("a", "t", 5, "z"), chunk([5, 3]));
    await meta.record("a", "t", D, "live", 4);
    await meta.record("a", "t", D, "live", 9);
    assert.deepEqual(
      ats((await meta.page("a", "t", 0, 100)).entries),
      [10, 9, 8, 7, 6, 5, 4, 3, 2, 1],
    );
    assert.deepEqual(ats((await meta.page("a", "t", 4, 3)).entries), [6, 5, 4]);
  });
});

Deno.test("sweepPullHistory compacts every target and drops last-pull times of gone revisions", async () => {
  await withKv(async (kv, meta) => {
    for (let at = 1; at <= 5; at++) {
      await meta.record("a", "v1", D, "c", at);
      await meta.record("a", D, D, "c", at);
      await meta.record("b/c", "latest", D2, "c", at);
    }
    // Only target left in chunk form: it must still be trimmed.
    await kv.set(
      K.pullChunk("z", "old", 3, "q"),
      {
        entries: [{ client: "c", at: 3 }, { client: "c", at: 2 }, { client: "c", at: 1 }],
      } satisfies PullChunk,
    );
    await kv.set(K.rev("a", D), { mediaType: "x", size: 1, pushedAt: 1 }); // D in a survives
    const cfg = defaultConfig();
    cfg.global.maxPulls = 2;

    const dry = await sweepPullHistory(kv, cfg, { dryRun: true, now: 100 });
    assert.deepEqual({ targets: dry.targets, dropped: dry.dropped }, { targets: 4, dropped: 10 });
    assert.equal(await meta.lastPulled("b/c", D2), 5, "dry run drops nothing");

    const r = await sweepPullHistory(kv, cfg, { now: 100 });
    assert.deepEqual({ targets: r.targets, dropped: r.dropped }, { targets: 4, dropped: 10 });
    assert.ok(r.scanned >= 15);
    for (const [ns, t] of [["a", "v1"], ["a", D], ["b/c", "latest"]]) {
      assert.deepEqual(ats((await meta.page(ns, t, 0, 9)).entries), [5, 4], `${ns} ${t}`);
    }
    assert.deepEqual(ats((await meta.page("z", "old", 0, 9)).entries), [3, 2]);
    assert.equal(await meta.lastPulled("a", D), 5);
    assert.equal(await meta.lastPulled("b/c", D2), null, "revision gone: last pull dropped");
    assert.equal((await sweepPullHistory(kv, cfg, { now: 100 })).dropped, 0);
  });
});
