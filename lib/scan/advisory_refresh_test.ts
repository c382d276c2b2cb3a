// The download schedule after failures: the pause doubles with each failed run in a row, from
// 15 minutes up to the refresh interval; a run that succeeds goes back to the interval; the
// warn line names ecosystems that failed alike once.
import assert from "node:assert/strict";
import { defaultConfig } from "../config/mod.ts";
import {
  failedText,
  failureLine,
  fetchInto,
  type FetchRun,
  FIRST_RETRY_SECS,
  nextAttemptAt,
  readFetchRun,
} from "./advisory_refresh.ts";

const run = (failures: number | undefined, failed = true): FetchRun => ({
  started_at: 1_000_000,
  finished_at: 1_000_500,
  updated: [],
  unchanged: [],
  failed: failed ? [{ ecosystem: "Debian", error: "GET Debian advisories: refused" }] : [],
  ...(failures === undefined ? {} : { failures }),
});

Deno.test("advisory schedule: the pause after failed runs doubles up to the interval", () => {
  const day = 86_400;
  const pause = (r: FetchRun, interval: number | null = day) => {
    const at = nextAttemptAt(r, interval);
    return at === null ? null : (at - r.started_at) / 1000;
  };
  assert.equal(pause(run(0, false)), day);
  assert.equal(pause(run(1)), FIRST_RETRY_SECS);
  assert.equal(pause(run(2)), 2 * FIRST_RETRY_SECS);
  assert.equal(pause(run(3)), 4 * FIRST_RETRY_SECS);
  assert.equal(pause(run(20)), day);
  assert.equal(pause(run(undefined)), FIRST_RETRY_SECS, "a record from before the count");
  assert.equal(pause(run(1), 60), 60, "never later than the interval");
  assert.equal(pause(run(1), null), null, "no schedule without an interval");
});

Deno.test("advisory schedule: the failure line groups ecosystems that failed alike", () => {
  const r: FetchRun = {
    ...run(1),
    failed: [
      { ecosystem: "Alpine", error: "GET Alpine advisories: http://x/Alpine/all.zip: refused" },
      { ecosystem: "Debian", error: "GET Debian advisories: http://x/Debian/all.zip: refused" },
      { ecosystem: "Rocky Linux", error: "GET Rocky Linux: http://x/Rocky%20Linux/all.zip: 500" },
    ],
  };
  assert.equal(
    failedText(r),
    "Alpine, Debian: GET Alpine advisories: http://x/Alpine/all.zip: refused; " +
      "Rocky Linux: GET Rocky Linux: http://x/Rocky%20Linux/all.zip: 500",
  );
  assert.equal(
    failureLine(r, 86_400),
    `advisory download failed: ${failedText(r)}; next attempt at ${
      new Date(r.started_at + FIRST_RETRY_SECS * 1000).toISOString()
    }`,
  );
  assert.match(failureLine(r, null)!, /next attempt when "advisories fetch" runs/);
  assert.equal(failureLine(run(0, false), 86_400), null);
});

Deno.test({
  name: "advisory schedule: each failed run in a row is counted, a good one resets it",
  sanitizeResources: false,
  sanitizeOps: false,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "wharf-advrun-" });
    const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
    const closed = `http://127.0.0.1:${(l.addr as Deno.NetAddr).port}`;
    l.close();
    const cfg = defaultConfig();
    cfg.scan.advisoriesUrl = closed;
    try {
      for (const n of [1, 2, 3]) {
        await fetchInto(cfg, dir, ["Debian"]);
        const r = (await readFetchRun(dir))!;
        assert.equal(r.failures, n);
        assert.match(r.failed[0].error, /Connection refused/);
      }
      // No ecosystem to fetch fails nothing: the count starts again.
      await fetchInto(cfg, dir, []);
      const r = (await readFetchRun(dir))!;
      assert.deepEqual(r.failed, []);
      assert.equal(r.failures, undefined);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
