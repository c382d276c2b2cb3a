// The compare view over a layer that is not fully indexed (issue 33 §5), in chromium: the layer is
// named with its state and reason, and the page never says "The two filesystems are the same"
// when a layer was left out; two fully indexed equal images still read the same.
import assert from "node:assert/strict";
import { req } from "../helpers/api.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { pushTarImage } from "../helpers/tar_image.ts";
import { tarOf } from "../helpers/tar.ts";
import { assertAccessible, browserSkipReason, launch, screenshot } from "./_browser.ts";

const base = { ignore: browserSkipReason !== null, sanitizeOps: false, sanitizeResources: false };
const CONFIG = `[ui]\nenabled = true\n[global.job_queue]\npoll_interval_ms = 100\n`;

/** Waits for the diff's 200, so the page shows it without the indexing state. */
async function diffReady(s: TestServer, ns: string, from: string, to: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const r = await req(s, `/v2/${ns}/_svc/diff?from=${from}&to=${to}`);
    await r.body?.cancel();
    if (r.status === 200) return;
    if (Date.now() > deadline) assert.fail(`diff ${r.status}\n${s.output().slice(-3000)}`);
    await new Promise((res) => setTimeout(res, 150));
  }
}

Deno.test({
  ...base,
  name: "ui in chromium: compare names a layer not indexed and never calls the images the same",
  fn: () =>
    withServer({ config: CONFIG }, async (s) => {
      const ns = "cmpu/app";
      const layer = tarOf([{ path: "etc/a.conf", data: "a=1\n" }]);
      await pushTarImage(s.url, ns, "a", [layer]);
      const b = await pushTarImage(s.url, ns, "b", [
        layer,
        new TextEncoder().encode(JSON.stringify({ not: "a tar" }).repeat(20)),
      ]);
      await pushTarImage(s.url, ns, "a2", [layer]);
      await diffReady(s, ns, "a", "b");
      await diffReady(s, ns, "a", "a2");
      const browser = await launch();
      try {
        const page = await browser.newPage();
        await page.goto(`${s.url}/_compare/${ns}?from=a&to=b`);
        const named = page.locator(
          `[data-section="not-indexed"] li[data-layer="${b.layers[1]}"]`,
        );
        await named.waitFor();
        assert.equal(await named.getAttribute("data-state"), "unsupported");
        assert.match((await named.textContent())!, /^b L2: not listed: not a tar archive/);
        const empty = page.locator("[data-section=diff] .empty");
        assert.notEqual(await empty.getAttribute("data-incomplete"), null);
        assert.match((await empty.textContent())!, /^No differences in what was compared; /);
        const all = (await page.locator("[data-section=diff]").textContent())!;
        assert.ok(!all.includes("The two filesystems are the same"), all);
        await assertAccessible(page, "compare with a layer not indexed");
        await screenshot(page, "compare-not-indexed");

        // Fully indexed and equal: the same.
        await page.goto(`${s.url}/_compare/${ns}?from=a&to=a2`);
        await page.waitForSelector("[data-section=diff] .empty");
        assert.equal(
          (await page.locator("[data-section=diff] .empty").textContent())!.trim(),
          "The two filesystems are the same.",
        );
        assert.equal(await page.locator('[data-section="not-indexed"]').count(), 0);
      } finally {
        await browser.close();
      }
    }),
});
