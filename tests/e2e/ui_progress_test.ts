// Long runs' progress in the web UI (issue 37 item 5), in Chromium at 1400 and 420 px, never wider
// than the window, with axe-core and screenshots: the Jobs page of the index queue shows two
// reindex batches (one of a namespace with a long name) with done of total as a bar and in words,
// and the Replication page shows a sync run's tags checked of those to check while it runs.
import assert from "node:assert/strict";
import { req } from "../helpers/api.ts";
import { pushImage, runCli, startServer, type TestServer, withServer } from "../helpers/server.ts";
import { wharfCommand } from "../helpers/launch.ts";
import { tarOf } from "../helpers/tar.ts";
import { pushTarImage } from "../helpers/tar_image.ts";
import {
  assertAccessible,
  assertFits,
  assertInView,
  browserSkipReason,
  launch,
  screenshot,
} from "./_browser.ts";

const base = { ignore: browserSkipReason !== null, sanitizeOps: false, sanitizeResources: false };
const WIDTHS = [1400, 420] as const;
const LONG =
  "platform-team/build-infrastructure/very-long-service-name-for-wrapping/release-candidates";
/** Each blob GET to the upstream waits this long: the sync run lasts long enough to be watched. */
const BLOB_DELAY_MS = 4000;

async function until<T>(what: string, s: TestServer, f: () => Promise<T | null | false>) {
  const deadline = Date.now() + 90_000;
  for (;;) {
    const v = await f();
    if (v) return v;
    assert.ok(Date.now() < deadline, `${what}: timed out\n${s.output().slice(-3000)}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

/** A proxy to `target` that holds each blob GET for BLOB_DELAY_MS. */
function slowProxy(target: string) {
  return Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (r) => {
    const u = new URL(r.url);
    if (r.method === "GET" && u.pathname.includes("/blobs/")) {
      await new Promise((res) => setTimeout(res, BLOB_DELAY_MS));
    }
    const headers = new Headers(r.headers);
    headers.delete("host");
    const res = await fetch(`${target}${u.pathname}${u.search}`, {
      method: r.method,
      headers,
      redirect: "manual",
    });
    return new Response(res.body, { status: res.status, headers: res.headers });
  });
}

Deno.test({
  ...base,
  name: "ui in chromium: long runs on the Jobs page and a sync run on the Replication page",
  fn: async () => {
    const up = await startServer();
    const proxy = slowProxy(up.url);
    try {
      for (let i = 0; i < 12; i++) await pushImage(up.url, "team/app", `v${i}`);
      await withServer({
        // The index queue is not drained here: the batches stay where the test puts them. Nor is
        // the cache queue: the sync entry runs when `main.ts sync` runs it.
        config: `[ui]
enabled = true

[global.job_queue]
poll_interval_ms = 100

[global.job_queue.concurrency]
index = 0
cache = 0

[global.index]
on_push = "none"

[repository."hub"]
[[repository."hub".upstream]]
url = "http://127.0.0.1:${proxy.addr.port}"

[[repository."hub".sync]]
namespaces = ["team/app"]
interval_secs = 3600
`,
      }, async (s) => {
        const longLayers: string[] = [];
        for (let i = 0; i < 2; i++) {
          const tar = tarOf([{ path: `etc/long-${i}`, data: `${i}\n` }]);
          longLayers.push(...(await pushTarImage(s.url, LONG, `v${i}`, [tar])).layers);
        }
        for (let i = 0; i < 12; i++) {
          const tar = tarOf([{ path: `etc/app-${i}`, data: `${i}\n` }]);
          await pushTarImage(s.url, `team/ns${i % 3}`, `v${i}`, [tar]);
        }
        // The long namespace's batch first; the whole registry's then queues the other 12.
        const one = await runCli(s, "reindex", ["--namespace", LONG, "--quiet"]);
        assert.equal(one.code, 0, one.stderr);
        const all = await runCli(s, "reindex", ["--quiet"]);
        assert.equal(all.code, 0, all.stderr);
        // Five of the 12 settle (an admin's delete counts as done).
        const pending = await (await req(s, "/v2/_svc/jobs/list?queue=index")).json();
        const mine = pending.jobs.filter((j: { lock_key: string }) =>
          !longLayers.includes(j.lock_key)
        );
        assert.equal(mine.length, 12);
        for (const j of mine.slice(0, 5)) {
          const d = await req(s, `/v2/_svc/jobs/pending?queue=index&key=${j.storage_key}`, {
            method: "DELETE",
          });
          assert.equal(d.status, 204);
        }

        const browser = await launch();
        try {
          const page = await browser.newPage();
          for (const width of WIDTHS) {
            await page.setViewportSize({ width, height: 900 });
            await page.goto(`${s.url}/_jobs/index`);
            await page.waitForSelector(".long-runs li[data-run=reindex] .run-bar");
            const runs = await page.$$eval(
              ".long-runs li[data-run=reindex]",
              (els) =>
                els.map((e) => ({
                  label: e.querySelector(".run-label")?.textContent,
                  figures: e.querySelector("[data-run-figures]")?.textContent,
                  now: e.querySelector("[role=progressbar]")?.getAttribute("aria-valuenow"),
                  max: e.querySelector("[role=progressbar]")?.getAttribute("aria-valuemax"),
                  width: (e.querySelector(".run-done") as HTMLElement).style.width,
                })),
            );
            assert.deepEqual(runs.map((r) => r.label), [
              "layers without a current index of every namespace",
              `layers without a current index of namespace ${LONG}`,
            ]);
            assert.equal(runs[0].figures, "5 of 12 jobs done · running");
            assert.deepEqual([runs[0].now, runs[0].max], ["5", "12"]);
            assert.match(runs[0].width, /^41\.66/);
            assert.equal(runs[1].figures, "0 of 2 jobs done · running");
            await assertFits(page, `jobs at ${width}`);
            await assertInView(page, ".long-runs li", `jobs at ${width}`);
            await assertInView(page, ".long-runs .run-bar", `jobs at ${width}`);
            await assertAccessible(page, `jobs at ${width}`, ".long-runs");
            await screenshot(page, `progress-jobs-${width}`);
          }

          // A sync run, as `main.ts sync` runs it against the slow upstream.
          const sync = wharfCommand(["sync", "--quiet", "-c", s.configPath], {
            env: { NO_COLOR: "1" },
            stdin: "null",
          }).output();
          try {
            await until("a sync run part-way", s, async () => {
              const st = await (await req(s, "/v2/_svc/replication/status")).json();
              const p = st.syncs[0]?.progress;
              return p && p.state === "running" && p.done > 0 && p.done < 12 && p;
            });
            for (const width of WIDTHS) {
              await page.setViewportSize({ width, height: 900 });
              await page.goto(`${s.url}/_replication`);
              await page.waitForSelector("[data-sync-field=progress] .run-bar");
              const figures = await page.textContent(
                "[data-sync-field=progress] [data-run-figures]",
              );
              assert.match(figures ?? "", /^\d+ of 12 tags done( · [\d.]+ (B|KiB))? · running$/);
              await assertFits(page, `replication at ${width}`);
              await assertAccessible(page, `replication at ${width}`);
              await screenshot(page, `progress-replication-${width}`);
            }
          } finally {
            const done = await sync;
            assert.equal(done.code, 0, new TextDecoder().decode(done.stderr));
            assert.match(new TextDecoder().decode(done.stdout), /fetched 12 tag\(s\)/);
          }
          const st = await (await req(s, "/v2/_svc/replication/status")).json();
          assert.equal(st.syncs[0].progress, null, "no run in progress once it ended");
        } finally {
          await browser.close();
        }
      });
    } finally {
      await proxy.shutdown();
      await up.stop();
    }
  },
});
