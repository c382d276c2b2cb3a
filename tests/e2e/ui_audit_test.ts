// The web UI's Audit page in Chromium: the top bar links to it only when the trail is on, it
// lists the records newest first, and its filters (identity, namespace prefix, action, time
// window) narrow the listing through the page's query; "Load more" follows the cursor.
import assert from "node:assert/strict";
import { pushImage, withServer } from "../helpers/server.ts";
import { assertAccessible, browserSkipReason, launch, screenshot } from "./_browser.ts";

const base = { ignore: browserSkipReason !== null, sanitizeOps: false, sanitizeResources: false };

Deno.test({
  name: "ui: the Audit page lists, filters and pages the audit trail",
  ...base,
  fn: async () => {
    const config = `[ui]\nenabled = true\n[global.audit]\nenabled = true\n`;
    await withServer({ config }, async (s) => {
      await pushImage(s.url, "team/app", "v1");
      await pushImage(s.url, "team/app", "v2");
      await pushImage(s.url, "ops/tool", "v1");
      // 15 more images: more records than one page (50) holds.
      for (let i = 0; i < 15; i++) await pushImage(s.url, "bulk/x", `t${i}`);
      const browser = await launch();
      try {
        const page = await browser.newPage();
        await page.goto(`${s.url}/`);
        await page.click('header nav a:has-text("Audit")');
        await page.waitForSelector("table[data-audit]");
        assert.equal(new URL(page.url()).pathname, "/_audit");
        assert.equal(await page.locator("tbody tr").count(), 50);
        await page.click('button:has-text("Load more")');
        await page.waitForFunction(() => document.querySelectorAll("tbody tr").length > 50);
        // 18 images × (2 blobs + manifest + tag) = 72 records.
        await page.waitForFunction(() => document.querySelectorAll("tbody tr").length === 72);
        assert.equal(await page.locator('button:has-text("Load more")').count(), 0);
        await screenshot(page, "audit-all");
        await assertAccessible(page, "audit page");

        await page.fill('input[name="namespace"]', "team/");
        await page.fill('input[name="action"]', "manifest.push");
        await page.click('button:has-text("Filter")');
        await page.waitForFunction(() =>
          location.search.includes("namespace=team") &&
          document.querySelectorAll("tbody tr").length === 2
        );
        const targets = await page.locator("tbody tr td:nth-child(6)").allTextContents();
        assert.ok(targets[0].includes("team/app") && targets[0].includes("v2"), targets[0]);
        assert.ok(targets[1].includes("v1"), targets[1]);
        assert.deepEqual(
          await page.locator("tbody tr td:nth-child(2)").allTextContents(),
          ["manifest.push", "manifest.push"],
        );
        await screenshot(page, "audit-filtered");

        // A window in the future matches nothing; an unknown identity neither.
        const future = new Date(Date.now() + 86_400_000);
        const pad = (n: number) => String(n).padStart(2, "0");
        await page.fill(
          'input[name="since"]',
          `${future.getFullYear()}-${pad(future.getMonth() + 1)}-${pad(future.getDate())}T${
            pad(future.getHours())
          }:${pad(future.getMinutes())}`,
        );
        await page.click('button:has-text("Filter")');
        await page.waitForSelector("p.empty");
        assert.match(await page.locator("p.empty").innerText(), /No audit records match/);
        await page.goto(`${s.url}/_audit?identity=nobody`);
        await page.waitForSelector("p.empty");
        // The query is the page's address: a filtered view is a link.
        await page.goto(`${s.url}/_audit?namespace=ops/`);
        await page.waitForFunction(() => document.querySelectorAll("tbody tr").length === 4);
        assert.equal(await page.inputValue('input[name="namespace"]'), "ops/");
      } finally {
        await browser.close();
      }
    });
  },
});

Deno.test({
  name: "ui: without [global.audit] the top bar has no Audit link",
  ...base,
  fn: async () => {
    await withServer({ config: `[ui]\nenabled = true\n` }, async (s) => {
      const browser = await launch();
      try {
        const page = await browser.newPage();
        await page.goto(`${s.url}/`);
        await page.waitForSelector('header nav a:has-text("Replication")');
        await new Promise((r) => setTimeout(r, 500));
        assert.equal(await page.locator('header nav a:has-text("Audit")').count(), 0);
        await page.goto(`${s.url}/_audit`);
        // the page says the trail is off and which key turns it on, instead of "Not found"
        const off = page.locator("[data-audit-off]");
        await off.waitFor();
        assert.match(await off.innerText(), /\[global\.audit\] enabled = true/);
      } finally {
        await browser.close();
      }
    });
  },
});
