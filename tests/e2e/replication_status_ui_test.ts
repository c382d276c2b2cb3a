// The replication status view (GET /v2/_svc/replication/status) and its UI page in Chromium, with
// one healthy downstream (docker-registry) and one failing one (nothing listens on its port):
// per downstream the body reports pending jobs, lag, last success, last error and outcomes; the
// repository list badges the repository whose downstream fails, and the top bar's Replication
// link opens the page.
import assert from "node:assert/strict";
import { req } from "../helpers/api.ts";
import { pushImage, withServer } from "../helpers/server.ts";
import { assertAccessible, browserSkipReason, launch, screenshot } from "./_browser.ts";
import { distributionMissing, freePort, startDistribution } from "./_distribution.ts";
import { until } from "../helpers/until.ts";

const skipReason = browserSkipReason ?? distributionMissing();
const base = { ignore: skipReason !== null, sanitizeOps: false, sanitizeResources: false };

function config(distUrl: string, deadPort: number): string {
  return `
[ui]
enabled = true

[global.job_queue]
poll_interval_ms = 50
backoff_min_ms = 200
backoff_max_ms = 1000
max_attempts = 1000
lease_secs = 3

[[repository."team".downstream]]
name = "dist"
url = "${distUrl}"
mode = "event"

[[repository."ops".downstream]]
name = "down"
url = "http://127.0.0.1:${deadPort}"
mode = "event"
connect_timeout_secs = 1
`;
}

interface Downstream {
  repository: string;
  name: string;
  pending: number;
  oldest_pending_secs: number;
  failed: number;
  last_success_at: string | null;
  last_error: { at: string; outcome: string; message: string } | null;
  outcomes: Record<string, number>;
  supports: Record<string, boolean | null>;
  health: string;
}

Deno.test({
  ...base,
  name: "replication status: one healthy and one failing downstream, in the API and in chromium",
  fn: async () => {
    const dist = await startDistribution();
    try {
      await withServer({ config: config(dist.url, freePort()) }, async (s) => {
        await pushImage(s.url, "team/app", "v1");
        await pushImage(s.url, "ops/app", "v1");
        const read = async () => {
          const r = await req(s, "/v2/_svc/replication/status");
          assert.equal(r.status, 200);
          assert.equal(r.headers.get("content-type"), "application/json");
          return await r.json() as { downstreams: Downstream[]; syncs: unknown[] };
        };
        const by = (b: { downstreams: Downstream[] }, n: string) =>
          b.downstreams.find((d) => d.name === n)!;
        await until("dist pushed, down failed", async () => {
          const b = await read();
          return by(b, "dist").outcomes.pushed === 1 && by(b, "down").outcomes.failed >= 2;
        });
        const body = await read();
        assert.ok(Array.isArray(body.syncs));
        const ok = by(body, "dist");
        assert.equal(ok.repository, "team");
        assert.equal(ok.health, "ok");
        assert.equal(ok.pending, 0);
        assert.equal(ok.oldest_pending_secs, 0);
        assert.equal(ok.failed, 0);
        assert.ok(ok.last_success_at && Date.parse(ok.last_success_at) > Date.now() - 60_000);
        assert.equal(ok.last_error, null);
        const bad = by(body, "down");
        assert.equal(bad.repository, "ops");
        assert.equal(bad.health, "failing");
        assert.equal(bad.pending, 1);
        assert.ok(bad.oldest_pending_secs > 0);
        assert.equal(bad.last_success_at, null);
        assert.equal(bad.last_error?.outcome, "failed");
        assert.match(bad.last_error!.message, /downstream down/);
        assert.deepEqual(bad.supports, { tag_delete: null, digest_delete: null });
        // the metrics carry the same figures
        const metrics = await (await req(s, "/metrics")).text();
        assert.match(metrics, /wharf_replication_pending_jobs\{downstream="down"\} 1/);
        assert.match(metrics, /wharf_replication_outcomes\{downstream="dist",outcome="pushed"\} 1/);
        // a query is not part of this resource
        const q = await req(s, "/v2/_svc/replication/status?n=1");
        assert.equal(q.status, 404);
        assert.equal((await q.json()).errors[0].code, "NAME_UNKNOWN");

        const browser = await launch();
        try {
          const page = await browser.newPage();
          await page.goto(`${s.url}/`);
          await page.waitForSelector('tr[data-repository="ops"] [data-health="failing"]');
          assert.equal(await page.$('tr[data-repository="team"] [data-health]'), null);
          await screenshot(page, "replication-repositories-badge");
          await page.click('header nav a:has-text("Replication")');
          await page.waitForSelector('tr[data-downstream="down"][data-health="failing"]');
          assert.equal(new URL(page.url()).pathname, "/_replication");
          const row = (n: string, cell: string) =>
            page.textContent(`tr[data-downstream="${n}"] [data-${cell}]`);
          assert.equal((await row("down", "pending"))?.trim(), "1");
          assert.match((await row("down", "last-error"))!, /failed.*downstream down/s);
          assert.match((await row("dist", "last-success"))!, /\d/);
          assert.match((await row("dist", "outcomes"))!, /pushed 1/);
          assert.equal(
            await page.getAttribute('tr[data-downstream="dist"]', "data-health"),
            "ok",
          );
          await screenshot(page, "replication-status");
          await assertAccessible(page, "replication page");
        } finally {
          await browser.close();
        }
      });
    } finally {
      await dist.stop();
    }
  },
});
