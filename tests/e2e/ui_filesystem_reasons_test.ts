// The Filesystem tab says why a layer has no listing, from the entries endpoint's answer (issue 33
// §5): 202 `{status:"indexing"}` → "Indexing…" while it is asked again; 404 UNSUPPORTED → "Not
// listed: <detail>" (not a tar here), the other layers browsable; 503 PROVIDER_UNAVAILABLE with
// Retry-After (indexing could not run on the server's machine, retried there) → "Indexing could
// not run: <detail>; it will be retried", asked again when the server said, the tree reloading
// once the layer is listed. The 503 is the server's answer replayed by the browser's request
// routing: no test can make a real machine fail on cue. In Debian's chromium.
import assert from "node:assert/strict";
import { withServer } from "../helpers/server.ts";
import { pushTarImage } from "../helpers/tar_image.ts";
import { tarOf } from "../helpers/tar.ts";
import { assertAccessible, browserSkipReason, launch, screenshot } from "./_browser.ts";

const base = { ignore: browserSkipReason !== null, sanitizeOps: false, sanitizeResources: false };

// Layers are indexed when the tab first asks for them: the 202 state is seen.
const CONFIG = `
[ui]
enabled = true
[global.index]
on_push = "none"
[global.job_queue]
poll_interval_ms = 100
backoff_min_ms = 100
backoff_max_ms = 300
`;

const TAB = "section[data-tab=filesystem]";
const ROW = `${TAB} [role=treeitem]`;

Deno.test({
  ...base,
  name: "ui filesystem tab: why a layer has no listing (indexing, not listed, could not run)",
  fn: () =>
    withServer({ config: CONFIG }, async (s) => {
      const notTar = new TextEncoder().encode(JSON.stringify({ not: "a tar" }).repeat(20));
      const img = await pushTarImage(s.url, "fsr/img", "v1", [
        tarOf([{ path: "hello", data: "hi\n" }]),
        notTar,
        tarOf([{ path: "world", data: "w\n" }]),
      ]);
      const browser = await launch();
      try {
        const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
        const answers: number[] = [];
        page.on("response", (r) => {
          if (r.url().endsWith("/entries") && r.request().method() === "GET") {
            answers.push(r.status());
          }
        });

        // Never indexed: "Indexing…" while the layers answer 202, then the tree.
        await page.goto(`${s.url}/fsr/img:v1#filesystem`);
        const indexing = page.locator(`${TAB} .fs-indexing[role=status]`);
        await indexing.waitFor();
        assert.match((await indexing.textContent())!, /^Indexing layers? (L[1-3](, )?)+ of 3…/);
        await page.waitForSelector(ROW, { timeout: 30_000 });
        assert.ok(answers.includes(202), String(answers));

        // Not a tar: 404 UNSUPPORTED, its detail shown without the digest it repeats.
        const unlisted = page.locator(`${TAB} [data-unlisted="2"]`);
        assert.equal(await unlisted.getAttribute("data-kind"), "unlisted");
        const text = (await unlisted.textContent())!;
        assert.match(
          text,
          /^L2: Not listed: .*not a tar archive.*; the tree shows the other layers\.$/,
        );
        assert.ok(!text.includes(img.layers[1]), text);
        assert.ok(!text.includes("has no file listing"), text);
        assert.deepEqual(
          await page.$$eval(ROW, (rows) => rows.map((r) => (r as HTMLElement).dataset.path)),
          ["hello", "world"],
        );
        await assertAccessible(page, "filesystem tab with an unlisted layer", TAB);

        // Indexing could not run (the server's 503 for L3, replayed): said so, with the reason,
        // and the tree shows the other layers meanwhile.
        const l3 = img.layers[2];
        const unavailable = (url: URL) => url.pathname.endsWith(`/layers/${l3}/entries`);
        const heads: string[] = [];
        await page.route(unavailable, (route) => {
          heads.push(route.request().method());
          return route.fulfill({
            status: 503,
            headers: { "content-type": "application/json", "retry-after": "2" },
            body: JSON.stringify({
              errors: [{
                code: "PROVIDER_UNAVAILABLE",
                message: "provider unavailable",
                detail:
                  `${l3}: indexing could not run: no sandbox process could be started; it is retried`,
              }],
            }),
          });
        });
        await page.reload();
        const down = page.locator(`${TAB} [data-unlisted="3"]`);
        await down.waitFor();
        assert.equal(await down.getAttribute("data-kind"), "unavailable");
        assert.equal(
          (await down.textContent())!,
          "L3: Indexing could not run: no sandbox process could be started; it will be retried; " +
            "the tree shows the other layers.",
        );
        assert.equal(await page.locator(`${TAB} .error`).count(), 0, "not the tab's error");
        assert.deepEqual(
          await page.$$eval(ROW, (rows) => rows.map((r) => (r as HTMLElement).dataset.path)),
          ["hello"],
        );
        await screenshot(page, "filesystem-layer-reasons");
        // Asked again (HEAD) after Retry-After; once the server lists it, the tree has it.
        const deadline = Date.now() + 15_000;
        while (!heads.includes("HEAD")) {
          if (Date.now() > deadline) assert.fail(`no retry: ${heads}`);
          await new Promise((res) => setTimeout(res, 200));
        }
        await page.unroute(unavailable);
        await page.waitForSelector(`${ROW}[data-path="world"]`, { timeout: 15_000 });
        assert.equal(await page.locator(`${TAB} [data-unlisted="3"]`).count(), 0);
        assert.equal(await page.locator(`${TAB} [data-unlisted="2"]`).count(), 1);
      } finally {
        await browser.close();
      }
    }),
});
