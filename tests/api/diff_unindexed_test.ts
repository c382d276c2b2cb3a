// The image diff over layers that are not fully indexed (issue 33 §5, docs/api.md#image-diff): a
// layer that is not a tar (unsupported) or is cut short (partial) is named with its state on its
// image's side and the diff is not `complete`, where it used to compare what it could and read
// as "the same" (the unlisted layer's files simply missing).
import assert from "node:assert/strict";
import { req, serverTestOpts } from "../helpers/api.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { tarOf } from "../helpers/tar.ts";
import { pushTarImage } from "../helpers/tar_image.ts";

const FAST = `
[global.job_queue]
poll_interval_ms = 100
backoff_min_ms = 100
backoff_max_ms = 300
lease_secs = 3
`;

interface Side {
  digest: string;
  unindexed: { digest: string; state: string; error?: string }[];
}
interface Diff {
  from: Side;
  to: Side;
  added: unknown[];
  removed: unknown[];
  modified: unknown[];
  complete: boolean;
}

async function diff(s: TestServer, ns: string, from: string, to: string): Promise<Diff> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const r = await req(s, `/v2/${ns}/_svc/diff?from=${from}&to=${to}`);
    if (r.status === 200) return await r.json();
    assert.equal(r.status, 202, await r.clone().text());
    await r.body?.cancel();
    if (Date.now() > deadline) assert.fail(`diff still 202\n${s.output().slice(-3000)}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

Deno.test({
  ...serverTestOpts,
  name: "image diff: layers not fully indexed are named with their state; the diff is incomplete",
  fn: () =>
    withServer({ config: FAST }, async (s) => {
      const base = tarOf([{ path: "etc/a.conf", data: "a" }]);
      const a = await pushTarImage(s.url, "un/app", "a", [base]);
      // b adds a layer that is no tar at all: nothing of it can be listed.
      const junk = new TextEncoder().encode(JSON.stringify({ not: "a tar" }).repeat(40));
      const b = await pushTarImage(s.url, "un/app", "b", [base, junk]);
      // c adds a tar cut inside its second file: its first file is listed, the rest is not.
      const whole = tarOf([
        { path: "opt/first", data: "1" },
        { path: "opt/second", data: "x".repeat(4096) },
      ]);
      const c = await pushTarImage(s.url, "un/app", "c", [base, whole.subarray(0, 512 * 3)]);

      const ab = await diff(s, "un/app", "a", "b");
      assert.equal(ab.complete, false);
      assert.deepEqual(ab.from.unindexed, []);
      assert.deepEqual(ab.to.unindexed.map((l) => [l.digest, l.state]), [
        [b.layers[1], "unsupported"],
      ]);
      assert.ok(ab.to.unindexed[0].error, "the indexer's reason comes with it");
      // What could be compared is the same: the diff still does not call the images equal.
      assert.deepEqual([ab.added, ab.removed, ab.modified], [[], [], []]);

      const ca = await diff(s, "un/app", "c", "a");
      assert.equal(ca.complete, false);
      assert.deepEqual(ca.from.unindexed.map((l) => [l.digest, l.state]), [
        [c.layers[1], "partial"],
      ]);
      assert.deepEqual(ca.to.unindexed, []);

      // Two fully indexed images: complete.
      const aa = await diff(s, "un/app", "a", a.digest);
      assert.equal(aa.complete, true);
      assert.deepEqual([aa.from.unindexed, aa.to.unindexed], [[], []]);
    }),
});
