// The compare view in chromium (docs/ui.md#views): tags offered in From and To, a platform picker
// for an index, short digests with copy buttons and layers as L<n> (the page no wider than the
// window), file counts equal to the Filesystem tab's, and the server's reason on an error.
import assert from "node:assert/strict";
import { withServer } from "../helpers/server.ts";
import { pushTarImage } from "../helpers/tar_image.ts";
import { tarOf } from "../helpers/tar.ts";
import { jsonBytes, OCI_INDEX, OCI_MANIFEST } from "../helpers/oci_content.ts";
import { assertAccessible, browserSkipReason, launch, screenshot } from "./_browser.ts";

const base = { ignore: browserSkipReason !== null, sanitizeOps: false, sanitizeResources: false };
const CONFIG = `[ui]\nenabled = true\n[global.job_queue]\npoll_interval_ms = 100\n`;

Deno.test({
  ...base,
  name: "ui in chromium: compare offers tags and an index's platforms; short digests; counts agree",
  fn: () =>
    withServer({ config: CONFIG }, async (s) => {
      const ns = "cmp/app";
      const baseLayer = tarOf([
        { path: "etc", type: "5" },
        { path: "etc/a.conf", data: "a=1\n" },
        { path: "etc/link", type: "2", link: "a.conf" },
        { path: "usr", type: "5" },
        { path: "usr/bin", type: "5" },
        { path: "usr/bin/tool", data: "tool" },
      ]);
      const v1 = await pushTarImage(s.url, ns, "v1", [baseLayer]);
      const v2 = await pushTarImage(s.url, ns, "v2", [
        baseLayer,
        tarOf([{ path: "etc/a.conf", data: "a=22\n" }, { path: "etc/new.conf", data: "n\n" }]),
      ]);
      const arm = await pushTarImage(s.url, ns, "arm-only", [
        baseLayer,
        tarOf([{ path: "arm.txt", data: "arm\n" }]),
      ], { architecture: "arm64" });
      const sizeOf = async (d: string) =>
        (await (await fetch(`${s.url}/v2/${ns}/manifests/${d}`, {
          headers: { accept: OCI_MANIFEST },
        })).arrayBuffer()).byteLength;
      const idx = await fetch(`${s.url}/v2/${ns}/manifests/multi`, {
        method: "PUT",
        headers: { "content-type": OCI_INDEX },
        body: jsonBytes({
          schemaVersion: 2,
          mediaType: OCI_INDEX,
          manifests: [
            {
              mediaType: OCI_MANIFEST,
              digest: v1.digest,
              size: await sizeOf(v1.digest),
              platform: { os: "linux", architecture: "amd64" },
            },
            {
              mediaType: OCI_MANIFEST,
              digest: arm.digest,
              size: await sizeOf(arm.digest),
              platform: { os: "linux", architecture: "arm64" },
            },
          ],
        }) as BodyInit,
      });
      assert.equal(idx.status, 201);
      await idx.body?.cancel();
      const browser = await launch();
      try {
        const page = await browser.newPage();
        await page.goto(`${s.url}/_compare/${ns}`);
        await page.waitForSelector("datalist#c-refs-from option", { state: "attached" });
        assert.deepEqual(
          await page.$$eval("datalist#c-refs-from option", (os) =>
            os.map((o) => o.getAttribute("value"))),
          ["arm-only", "multi", "v1", "v2"],
        );
        // an index asks for its platform
        await page.fill("input[name=from]", "multi");
        await page.waitForSelector("select[name=from_platform]");
        assert.deepEqual(
          await page.$$eval("select[name=from_platform] option", (os) =>
            os.map((o) =>
              o.textContent
            )),
          ["linux/amd64", "linux/arm64"],
        );
        await page.selectOption("select[name=from_platform]", "linux/arm64");
        await page.fill("input[name=to]", "v2");
        await page.click("button:has-text('Compare')");
        await page.waitForSelector("[data-section=diff]", { timeout: 30_000 });
        const url = new URL(page.url());
        assert.equal(url.searchParams.get("from"), "multi");
        assert.equal(url.searchParams.get("from_platform"), "linux/arm64");
        // the From side is the arm64 image; digests short, each with its copy button
        const fromRow = "tr[data-side='multi (linux/arm64)']";
        assert.equal(await page.getAttribute(`${fromRow} button.copy`, "data-copy"), arm.digest);
        assert.equal((await page.textContent(`${fromRow} code`))!.length, 19);
        assert.equal(
          await page.getAttribute("tr[data-side='v2'] button.copy", "data-copy"),
          v2.digest,
        );
        // layers as L<n>, never a full digest in the lists
        const layerCells = await page.$$eval(".layer-ref", (es) =>
          es.map((e) => e.textContent));
        assert.ok(
          layerCells.length > 0 && layerCells.every((t) => /^L\d+$/.test(t!)),
          String(layerCells),
        );
        for (const w of [1280, 420]) {
          await page.setViewportSize({ width: w, height: 900 });
          const [scroll, inner] = await page.evaluate(() => [
            document.documentElement.scrollWidth,
            innerWidth,
          ]);
          assert.ok(scroll <= inner, `compare at ${w} px: ${scroll} px wide`);
          await screenshot(page, `compare-${w}`);
        }
        await page.setViewportSize({ width: 1280, height: 900 });
        await assertAccessible(page, "compare");
        // files counted as the Filesystem tab counts them
        const compared = await page.textContent("tr[data-side='v2'] [data-files]");
        await page.goto(`${s.url}/${ns}:v2#filesystem`);
        await page.waitForSelector(".fs-summary");
        const summary = (await page.textContent(".fs-summary"))!;
        assert.match(summary, new RegExp(`, ${compared} files in the image`), summary);
        assert.equal(compared, "3");
        // the server's reason for an error is shown
        await page.goto(`${s.url}/_compare/${ns}?from=nope&to=v1`);
        await page.waitForSelector("[role=alert] [data-detail]");
        assert.match((await page.textContent("[data-detail]"))!, /cmp\/app:nope/);
      } finally {
        await browser.close();
      }
    }),
});
