// The UI's own routes never hide a repository (docs/ui.md#views): a repository named `jobs` keeps
// its pages at SPEC's `/jobs…` while the queues stay reachable at `/_jobs` from the top bar; with
// no such repository `/jobs` is still the queues. A missing image gets a not-found page with
// breadcrumbs and ways back.
import assert from "node:assert/strict";
import { withServer } from "../helpers/server.ts";
import { pushTarImage } from "../helpers/tar_image.ts";
import { tarOf } from "../helpers/tar.ts";
import { assertAccessible, browserSkipReason, launch, screenshot } from "./_browser.ts";

const base = {
  ignore: browserSkipReason !== null,
  sanitizeOps: false,
  sanitizeResources: false,
};
const UI = `[ui]\nenabled = true\n`;

Deno.test({
  ...base,
  name: "ui in chromium: a repository named jobs stays reachable; the queues move to /_jobs",
  fn: () =>
    withServer({ config: UI }, async (s) => {
      const layer = tarOf([{ path: "etc/hello", data: "hi\n" }]);
      await pushTarImage(s.url, "jobs/app", "v1", [layer]);
      await pushTarImage(s.url, "jobs/cache", "v1", [layer]);
      const browser = await launch();
      try {
        const page = await browser.newPage();
        await page.goto(`${s.url}/`);
        await page.click('tr[data-repository="jobs"] a');
        await page.waitForSelector('tr[data-namespace="jobs/app"]');
        assert.equal(new URL(page.url()).pathname, "/jobs");
        await screenshot(page, "routes-jobs-repository");
        await page.click('tr[data-namespace="jobs/app"] a');
        await page.waitForSelector("tr[data-digest]");
        await page.click('tr[data-digest] a.tag:has-text("v1")');
        await page.waitForSelector("section[data-manifest]");
        assert.equal(new URL(page.url()).pathname, "/jobs/app:v1");
        // SPEC's `/jobs/{queue}` names a namespace too when the repository exists
        await page.goto(`${s.url}/jobs/cache`);
        await page.waitForSelector("tr[data-digest]");
        assert.match((await page.textContent("h1"))!, /^jobs\/cache$/);
        // a deep link straight to the image
        await page.goto(`${s.url}/jobs/app:v1`);
        await page.waitForSelector("section[data-manifest]");
        // the top bar's Jobs opens the queues at their own path
        await page.click('header nav a:has-text("Jobs")');
        await page.waitForSelector("#jobs-title");
        assert.equal(new URL(page.url()).pathname, "/_jobs");
        assert.equal(await page.textContent("#jobs-title"), "Jobs: cache");
        await page.click('nav[aria-label="Job queues"] a:has-text("scan")');
        await page.waitForSelector('#jobs-title:has-text("Jobs: scan")');
        assert.equal(new URL(page.url()).pathname, "/_jobs/scan");
        // a queue name under `jobs` that is no namespace: not found, with the way to the queue
        await page.goto(`${s.url}/jobs/index`);
        await page.waitForSelector("[data-not-found]");
        assert.equal(
          await page.getAttribute('a:has-text("The index job queue")', "href"),
          "/_jobs/index",
        );
        await assertAccessible(page, "not found under jobs");
      } finally {
        await browser.close();
      }
    }),
});

Deno.test({
  ...base,
  name:
    "ui in chromium: without a jobs repository /jobs is the queues; a missing image is a not-found page with breadcrumbs",
  fn: () =>
    withServer({ config: UI }, async (s) => {
      const layer = tarOf([{ path: "etc/hello", data: "hi\n" }]);
      await pushTarImage(s.url, "team/app", "v1", [layer]);
      const browser = await launch();
      try {
        const page = await browser.newPage();
        await page.goto(`${s.url}/jobs`);
        await page.waitForSelector("#jobs-title");
        assert.equal(await page.textContent("#jobs-title"), "Jobs: cache");
        await page.goto(`${s.url}/jobs/replication`);
        await page.waitForSelector('#jobs-title:has-text("Jobs: replication")');
        // `/jobs/app:v1` is an image even without the repository: never a queue named `app:v1`
        await page.goto(`${s.url}/jobs/app:v1`);
        await page.waitForSelector("[data-not-found]");
        // a missing tag: breadcrumbs up to the namespace, the server's reason, the ways back
        await page.goto(`${s.url}/team/app:nope`);
        await page.waitForSelector("[data-not-found]");
        const crumbs = await page.$$eval(
          "[data-not-found] nav.crumbs a",
          (as) => as.map((a) => [a.textContent, a.getAttribute("href")]),
        );
        assert.deepEqual(crumbs, [["Repositories", "/"], ["team", "/team"], [
          "team/app",
          "/team/app",
        ]]);
        assert.match(
          (await page.textContent("[data-reason]"))!,
          /team\/app:nope/,
        );
        for (const theme of ["light", "dark"] as const) {
          await page.emulateMedia({ colorScheme: theme });
          await assertAccessible(page, `not found, ${theme}`);
          await screenshot(page, `not-found-${theme}`);
        }
        await page.click('a:has-text("All manifests of team/app")');
        await page.waitForSelector("tr[data-digest]");
        assert.equal(new URL(page.url()).pathname, "/team/app");
        // a missing namespace: up to its repository
        await page.goto(`${s.url}/team/gone`);
        await page.waitForSelector("[data-not-found]");
        assert.equal(
          await page.getAttribute('a:has-text("Up to team")', "href"),
          "/team",
        );
      } finally {
        await browser.close();
      }
    }),
});
