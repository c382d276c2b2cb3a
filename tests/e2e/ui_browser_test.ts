// The web UI in a real browser: Debian's chromium driven by playwright-core against a real Wharf.
// So far the repository list: hosted repositories before pull-through caches, badges, counts and
// the registry's name in the top bar.
import assert from "node:assert/strict";
import { chromium } from "playwright-core";
import { withServer } from "../helpers/server.ts";
import { pushTarImage } from "../helpers/tar_image.ts";
import { tarOf } from "../helpers/tar.ts";
import { OCI_MANIFEST } from "../helpers/oci_content.ts";
import { isFile, missingReason } from "./_tools.ts";

const CHROMIUM = "/usr/bin/chromium";
const skipReason = missingReason(
  "web UI browser",
  isFile(CHROMIUM) ? [] : ["chromium"],
  "apt-get install chromium",
);
const base = { ignore: skipReason !== null, sanitizeOps: false, sanitizeResources: false };

// DESIGN.md's measured flags for Debian's chromium on these machines.
const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

Deno.test({
  ...base,
  name: "ui in chromium: the repository list, hosted first, with badges and counts",
  fn: () =>
    // A second Wharf is the upstream of the pull-through cache.
    withServer({}, (up) =>
      withServer({
        config: `[ui]\nenabled = true\nname = "Dock 7"\n` +
          `[repository."cache"]\n[[repository."cache".upstream]]\nurl = "${up.url}"\n` +
          `[repository."zeta"]\nimmutable_tags = true\n`,
      }, async (s) => {
        const layer = tarOf([{ path: "etc/hello", data: "hi\n" }]);
        await pushTarImage(up.url, "lib", "v1", [layer]);
        const pulled = await fetch(`${s.url}/v2/cache/lib/manifests/v1`, {
          headers: { accept: OCI_MANIFEST },
        });
        assert.equal(pulled.status, 200);
        await pulled.body?.cancel();
        await pushTarImage(s.url, "zeta/web", "v1", [layer]);
        await pushTarImage(s.url, "alpha/one", "v1", [layer]);
        await pushTarImage(s.url, "alpha/two", "v1", [layer]);
        const browser = await chromium.launch({ executablePath: CHROMIUM, args: ARGS });
        try {
          const page = await browser.newPage();
          await page.goto(`${s.url}/`);
          await page.waitForSelector("tr[data-repository]");
          assert.equal(await page.textContent("header .brand"), "Dock 7");
          assert.equal(await page.title(), "Dock 7");
          const rows = await page.$$eval(
            "tr[data-repository]",
            (trs) => trs.map((tr) => Array.from(tr.querySelectorAll("td"), (td) => td.textContent)),
          );
          assert.deepEqual(rows, [
            ["alpha", "hosted", "", "2"],
            ["zetaimmutable", "hosted", "", "1"],
            ["cache", "pull-through cache", up.url, "1"],
          ]);
          // a deep link is the app too (its view is still to come)
          await page.goto(`${s.url}/alpha/one:v1`);
          assert.match((await page.textContent("main"))!, /not built yet/);
        } finally {
          await browser.close();
        }
      })),
});
