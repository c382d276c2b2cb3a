// What a newcomer still tripped on in the web UI (issue 37 items 1-4), in Chromium at 1400 and
// 420 px, each view never wider than the window (document.scrollWidth <= innerWidth), with
// axe-core and screenshots: the UI-off page of a first config; secret kinds with what each
// matches in plain words; the Jobs page's failed table (long errors fold, the row actions stay
// in view); the Audit page with the trail off; configured repositories that hold nothing yet;
// the compare page's breadcrumb; Pull history's sentence about update_pull_time; the note of an
// advisory download that failed.
import assert from "node:assert/strict";
import { req } from "../helpers/api.ts";
import { pushImage, type TestServer, withServer } from "../helpers/server.ts";
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

function closedPort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

async function until<T>(what: string, s: TestServer, f: () => Promise<T | null | false>) {
  const deadline = Date.now() + 90_000;
  for (;;) {
    const v = await f();
    if (v) return v;
    assert.ok(Date.now() < deadline, `${what}: timed out\n${s.output().slice(-3000)}`);
    await new Promise((res) => setTimeout(res, 200));
  }
}

Deno.test({
  ...base,
  name: "ui in chromium: a config without [ui] enabled answers a browser with one sentence",
  fn: () =>
    withServer({}, async (s) => {
      const browser = await launch();
      try {
        for (const width of WIDTHS) {
          // The page forbids every script (CSP); the accessibility check brings its own.
          const page = await browser.newPage({ viewport: { width, height: 800 }, bypassCSP: true });
          const r = await page.goto(`${s.url}/team/app:v1`);
          assert.equal(r?.status(), 404);
          assert.equal(
            (await page.textContent("body"))!.trim(),
            "The web UI is off: set [ui] enabled = true in Wharf's config file to turn it on.",
          );
          await assertFits(page, `ui off at ${width}`);
          await assertAccessible(page, `ui off at ${width}`);
          await screenshot(page, `ui-off-${width}`);
          await page.close();
        }
      } finally {
        await browser.close();
      }
    }),
});

const OS_RELEASE = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n';
const STATUS = "Package: openssl\nStatus: install ok installed\nArchitecture: amd64\n" +
  "Version: 3.0.11-1~deb12u1\n";
const SECRET = "wJalrXUtnFEMIK7MDENGbPxRfiCYzzzzzzzzzzzz";
const KEY_ID = "AKIAZ7Q3MN4PLK2XW9RT";

Deno.test({
  ...base,
  name:
    "ui in chromium at 1400 and 420 px: secret kinds in plain words, failed jobs in view, audit off, empty repositories, compare crumbs, pull history, a failed advisory download",
  fn: async () => {
    const adv = await Deno.makeTempDir({ prefix: "wharf-ui-first-hour-" });
    const dead = closedPort();
    const config = `
[ui]
enabled = true
[global.job_queue]
poll_interval_ms = 100
backoff_min_ms = 50
backoff_max_ms = 100
max_attempts = 1

# replication to a port nobody answers on: its jobs fail with long errors
[[repository."team".downstream]]
name = "dead"
url = "http://127.0.0.1:${dead}/mirror/${"long-path-segment-".repeat(6)}end"
connect_timeout_secs = 1

# configured, holding nothing: a cache before its first pull, a repository with only a quota
[repository."hub"]
namespace = "docker.io"
[[repository."hub".upstream]]
url = "http://127.0.0.1:${dead}"
[repository."quota-only".quota]
max_bytes = 1048576

[scan]
advisories_dir = ${JSON.stringify(adv)}
advisories_url = "http://127.0.0.1:${dead}"
advisories_ecosystems = ["Debian"]
refresh_interval_secs = 86400
reload_interval_secs = 1
`;
    try {
      await withServer({ config }, async (s) => {
        const img = await pushTarImage(
          s.url,
          "team/app",
          "v1",
          [tarOf([
            { path: "etc/os-release", data: OS_RELEASE },
            { path: "var/lib/dpkg/status", data: STATUS },
            { path: "app/config.env", data: `REGION=eu-west-1\naws_key=${KEY_ID}\n` },
          ])],
          { config: { Env: ["PATH=/usr/bin", `AWS_SECRET_ACCESS_KEY=${SECRET}`] } },
        );
        await pushImage(s.url, "team/app", "v2");
        // the failed replication jobs, and the report carrying the failed download
        await until("failed replication jobs", s, async () => {
          const b = await (await req(s, "/v2/_svc/jobs/failed?queue=replication")).json();
          return b.failed.length >= 2;
        });
        await until("a report with the failed download", s, async () => {
          const r = await req(s, `/v2/team/app/_svc/vulnerabilities/${img.digest}`);
          if (r.status !== 200) {
            await r.body?.cancel();
            return false;
          }
          const b = await r.json();
          return !b.refreshing && b.advisory_download !== undefined;
        });
        const browser = await launch();
        try {
          for (const width of WIDTHS) {
            const page = await browser.newPage({ viewport: { width, height: 900 } });
            const at = `at ${width}`;

            // Jobs: the failed table fits, its errors fold, Retry and Delete stay in view.
            await page.goto(`${s.url}/_jobs/replication`);
            await page.waitForSelector("table[data-jobs=failed] tr[data-job]");
            await assertFits(page, `jobs ${at}`);
            const rows = "table[data-jobs=failed] tr[data-job]";
            await assertInView(page, `${rows} button:has-text("Retry")`, `jobs ${at}`);
            await assertInView(page, `${rows} button.delete`, `jobs ${at}`);
            await assertInView(page, `${rows} td.error-text`, `jobs ${at}`);
            const first = page.locator(rows).first();
            const body = first.locator(".long-text-body");
            assert.match((await body.getAttribute("title"))!, /Connection refused/);
            const folded = await body.evaluate((e) => e.getBoundingClientRect().height);
            await screenshot(page, `jobs-failed-${width}`);
            await first.locator('button:has-text("Show all")').click();
            await first.locator('button:has-text("Show less")').waitFor();
            const open = await body.evaluate((e) => e.getBoundingClientRect().height);
            assert.ok(open > folded, `unfolded ${open} px, folded ${folded} px`);
            await assertFits(page, `jobs unfolded ${at}`);
            await assertInView(page, `${rows} button:has-text("Retry")`, `jobs unfolded ${at}`);
            await assertAccessible(page, `jobs ${at}`);
            await screenshot(page, `jobs-failed-unfolded-${width}`);

            // Audit with the trail off: says so first, and the key, no "Not found".
            await page.goto(`${s.url}/_audit`);
            await page.waitForSelector("[data-audit-off]");
            const audit = (await page.textContent("main"))!;
            assert.match(audit, /The audit trail is off/);
            assert.match(audit, /\[global\.audit\] enabled = true/);
            assert.doesNotMatch(audit, /Not found/);
            assert.equal(await page.isVisible("form[aria-label='Audit filters']"), false);
            await assertFits(page, `audit ${at}`);
            await assertAccessible(page, `audit off ${at}`);
            await screenshot(page, `audit-off-${width}`);

            // Repositories: the two configured ones holding nothing are listed, saying how.
            await page.goto(`${s.url}/`);
            await page.waitForSelector("tr[data-repository='team']");
            assert.deepEqual(
              await page.$$eval(
                "tr[data-repository]",
                (trs) =>
                  trs.map((
                    tr,
                  ) => [tr.getAttribute("data-repository"), tr.hasAttribute("data-empty")]),
              ),
              [["quota-only", true], ["team", false], ["hub", true]],
            );
            assert.match(
              (await page.textContent("tr[data-repository='hub']"))!,
              /Nothing cached yet: the first pull of an image under hub\//,
            );
            assert.match(
              (await page.textContent("tr[data-repository='quota-only']"))!,
              /Nothing pushed yet/,
            );
            await assertFits(page, `repositories ${at}`);
            await assertAccessible(page, `repositories ${at}`);
            await screenshot(page, `repositories-empty-${width}`);
            await page.click("tr[data-repository='hub'] a[href='/hub']");
            await page.waitForSelector("[data-empty-repository='hub']");
            assert.match((await page.textContent("main"))!, /Pull-through cache of http:/);
            await assertFits(page, `empty repository ${at}`);

            // Compare: the breadcrumb goes through the repository.
            await page.goto(`${s.url}/_compare/team/app?from=v1&to=v2`);
            await page.waitForSelector("nav.crumbs");
            assert.deepEqual(
              await page.$$eval(
                "nav.crumbs a",
                (as) => as.map((a) => [a.textContent, a.getAttribute("href")]),
              ),
              [["Repositories", "/"], ["team", "/team"], ["team/app", "/team/app"]],
            );
            await page.waitForSelector("[data-section=diff]");
            await assertFits(page, `compare ${at}`);

            // Pull history: one sentence naming update_pull_time.
            await page.goto(`${s.url}/team/app:v1#history`);
            await page.waitForSelector("[data-no-pulls]");
            assert.equal(
              (await page.textContent("[data-no-pulls]"))!.replace(/\s+/g, " ").trim(),
              "No pulls of this tag are recorded: Wharf records pulls only with " +
                "[global] update_pull_time = true in its config.",
            );
            await assertFits(page, `history ${at}`);

            // Vulnerabilities: the failed download and the config's secret in plain words.
            await page.goto(`${s.url}/team/app:v1#vulnerabilities`);
            await page.waitForSelector("[data-advisory-download]");
            const note = (await page.textContent("[data-advisory-download]"))!;
            assert.match(note, /^Advisory download failed at .*: Debian: .*Connection refused/);
            assert.match(note, /Wharf tries again at /);
            assert.ok(await page.getAttribute("[data-next-attempt]", "datetime"));
            assert.equal(
              (await page.textContent("[data-section=config-secrets] li"))!.replace(/\s+/g, " "),
              "cloudA-credentials in environment variable AWS_SECRET_ACCESS_KEY" +
                "cloud secret access key — a secret access key line set to a 40-character key",
            );
            await assertFits(page, `vulnerabilities ${at}`);
            await assertAccessible(page, `vulnerabilities ${at}`);
            await screenshot(page, `vulnerabilities-download-failed-${width}`);

            // Filesystem: the Secrets view and the file pane say what each kind matches.
            await page.goto(`${s.url}/team/app:v1#filesystem`);
            await page.click("button[data-view=secrets]");
            await page.waitForSelector("table[data-view=secrets] tbody tr");
            assert.equal(
              await page.textContent("table[data-view=secrets] .secret-kind"),
              "cloudA-access-keycloud access key id — a token starting AKIA or ASIA, mixing letters and digits",
            );
            await assertFits(page, `secrets view ${at}`);
            // its path opens the file: the summary over the preview says it too
            await page.click("table[data-view=secrets] a");
            await page.waitForSelector(".fs-secret-summary li");
            assert.equal(
              (await page.textContent(".fs-secret-summary li"))!.replace(/\s+/g, " "),
              "line 2: cloudA-access-keycloud access key id — a token starting AKIA or ASIA, mixing letters and digits",
            );
            assert.match(
              (await page.getAttribute(".fs-line.secret .fs-secret-tag", "title"))!,
              /^cloud access key id — /,
            );
            await assertFits(page, `file pane ${at}`);
            await assertAccessible(page, `file pane ${at}`);
            await page.locator(".fs-secret-summary").scrollIntoViewIfNeeded();
            await screenshot(page, `filesystem-secret-${width}`);
            await page.close();
          }
        } finally {
          await browser.close();
        }
      });
    } finally {
      await Deno.remove(adv, { recursive: true });
    }
  },
});
