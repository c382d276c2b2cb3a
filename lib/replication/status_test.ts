// The status view's health per downstream, on a temp KV: ok, lagging (oldest pending job older
// than LAGGING_SECS), failing (last run failed after the last success, or a dead letter), and an
// unsupported delete is not a failure.
import assert from "node:assert/strict";
import { buildConfig } from "../config/mod.ts";
import { JobQueues } from "../jobs/mod.ts";
import { pushTagJob } from "./jobs.ts";
import { DownstreamState } from "./state.ts";
import { LAGGING_SECS, replicationStatus } from "./status.ts";

const cfg = buildConfig({
  repository: {
    team: {
      downstream: [
        { name: "fine", url: "http://127.0.0.1:1" },
        { name: "slow", url: "http://127.0.0.1:2" },
        { name: "broken", url: "http://127.0.0.1:3" },
        { name: "limited", url: "http://127.0.0.1:4" },
      ],
    },
  },
}, []);

Deno.test("replication status: health, lag, counts and capabilities per downstream", async () => {
  const path = await Deno.makeTempFile({ suffix: ".kv" });
  const kv = await Deno.openKv(path);
  try {
    const jobs = new JobQueues(kv, cfg.global.jobQueue);
    const old = new JobQueues(kv, cfg.global.jobQueue, {}, () => Date.now() - 400_000);
    await old.queue("replication").enqueue(pushTagJob("slow", "team/a", "v1"));
    await jobs.queue("replication").enqueue(pushTagJob("broken", "team/a", "v1"));
    const state = new DownstreamState(kv);
    await state.record("fine", "pushed", null);
    await state.record("broken", "pushed", null);
    await new Promise((r) => setTimeout(r, 5));
    await state.record("broken", "failed", "downstream broken: 502 Bad Gateway");
    await state.record("limited", "pushed", null);
    await new Promise((r) => setTimeout(r, 5));
    await state.record("limited", "tag-delete-unsupported", "kept: a local tag needs it");
    await state.record("limited", "delete-unsupported", "405 UNSUPPORTED");
    await state.learn("limited", "http://127.0.0.1:4", { tagDelete: false, digestDelete: false });
    // a capability learned for another URL is not this downstream's
    await state.learn("fine", "http://elsewhere", { tagDelete: true });

    const s = await replicationStatus(cfg, state, jobs);
    const by = (n: string) => s.downstreams.find((d) => d.name === n)!;
    assert.deepEqual(s.downstreams.map((d) => d.name), ["fine", "slow", "broken", "limited"]);
    assert.equal(by("fine").health, "ok");
    assert.deepEqual(by("fine").supports, { tag_delete: null, digest_delete: null });
    assert.equal(by("fine").outcomes.pushed, 1);
    assert.equal(by("slow").health, "lagging");
    assert.equal(by("slow").pending, 1);
    assert.ok(by("slow").oldest_pending_secs > LAGGING_SECS);
    assert.equal(by("broken").health, "failing");
    assert.equal(by("broken").pending, 1);
    assert.equal(by("broken").last_error?.message, "downstream broken: 502 Bad Gateway");
    assert.equal(by("limited").health, "ok");
    assert.equal(by("limited").outcomes.unsupported, 2);
    assert.equal(by("limited").last_error?.outcome, "delete-unsupported");
    assert.deepEqual(by("limited").supports, { tag_delete: false, digest_delete: false });
    assert.deepEqual(s.syncs, []);
    assert.equal(s.truncated, false);

    // a success after the failure: in step again
    await state.record("broken", "pushed", null);
    assert.equal((await replicationStatus(cfg, state, jobs)).downstreams[2].health, "ok");
  } finally {
    kv.close();
    await Deno.remove(path);
  }
});
