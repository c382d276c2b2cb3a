// Issue 26 in the web UI (chromium): the repository list shows a storage bar per repository when
// quotas are configured — used bytes against the quota, the cache cap of a pull-through
// repository — and no storage column when none is.
import assert from "node:assert/strict";
import { pushImage, withServer } from "../helpers/server.ts";
import { assertAccessible, browserSkipReason, launch, screenshot } from "./_browser.ts";

const base = { ignore: browserSkipReason !== null, sanitizeOps: false, sanitizeResources: false };

Deno.test({
  ...base,
  name: "ui: repository list shows a storage bar against each quota",
  fn: async () => {
    const config = `[ui]\nenabled = true\n[repository."team".quota]\nmax_bytes = 100000\n` +
      `[global.quota]\ndefault_max_bytes = 5000000\n`;
    await withServer({ config }, async (s) => {
      await pushImage(s.url, "team/app", "v1", { layer: new Uint8Array(40_000).fill(7) });
      await pushImage(s.url, "solo/app", "v1");
      const listed = await (await fetch(`${s.url}/v2/_svc/repositories/list`)).json();
      const team = listed.repositories.find((r: { name: string }) => r.name === "team");
      const browser = await launch();
      try {
        const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
        await page.goto(`${s.url}/`);
        const row = page.locator('tr[data-repository="team"]');
        await row.waitFor();
        const meter = row.locator("meter");
        assert.equal(await meter.getAttribute("max"), "100000");
        assert.equal(await meter.getAttribute("value"), String(team.used_bytes));
        const text = await row.locator(".storage").innerText();
        assert.match(text, /^\s*\d+(\.\d+)? KiB of 97\.7 KiB$/);
        const solo = await page.locator('tr[data-repository="solo"] .storage').innerText();
        assert.match(solo, /of 4\.77 MiB$/);
        await assertAccessible(page, "repository list with storage bars", "main");
        await screenshot(page, "quota-repositories");
      } finally {
        await browser.close();
      }
    });
  },
});

Deno.test({
  ...base,
  name: "ui: no storage column without quotas",
  fn: async () => {
    await withServer({ config: `[ui]\nenabled = true\n` }, async (s) => {
      await pushImage(s.url, "team/app", "v1");
      const browser = await launch();
      try {
        const page = await browser.newPage();
        await page.goto(`${s.url}/`);
        await page.locator('tr[data-repository="team"]').waitFor();
        assert.equal(await page.locator("th", { hasText: "Storage" }).count(), 0);
        assert.equal(await page.locator("meter").count(), 0);
      } finally {
        await browser.close();
      }
    });
  },
});
