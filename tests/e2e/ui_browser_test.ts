// The web UI in a real browser: Debian's chromium driven by playwright-core against a real Wharf.
// The list views: the repository list (hosted before pull-through caches, badges, counts, the
// registry's name in the top bar), a repository's namespaces and a namespace's manifests (filter
// and sort over every entry), reached by clicking through; axe-core and screenshots in both themes.
import assert from "node:assert/strict";
import { withServer } from "../helpers/server.ts";
import { pushTarImage } from "../helpers/tar_image.ts";
import { tarOf } from "../helpers/tar.ts";
import { OCI_MANIFEST } from "../helpers/oci_content.ts";
import { assertAccessible, browserSkipReason, launch, pickTheme, screenshot } from "./_browser.ts";

const base = { ignore: browserSkipReason !== null, sanitizeOps: false, sanitizeResources: false };

Deno.test({
  ...base,
  name: "ui in chromium: repositories → namespaces → manifests, with badges, counts, filter, sort",
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
        await pushTarImage(s.url, "alpha/one", "a1", [layer]);
        await new Promise((r) => setTimeout(r, 20)); // distinct push times
        const v2 = await pushTarImage(s.url, "alpha/one", "v2", [layer], { v: 2 });
        const got = await fetch(`${s.url}/v2/alpha/one/manifests/${v2.digest}`, {
          headers: { accept: OCI_MANIFEST },
        });
        const put = await fetch(`${s.url}/v2/alpha/one/manifests/latest`, {
          method: "PUT",
          headers: { "content-type": OCI_MANIFEST },
          body: await got.arrayBuffer(),
        });
        assert.equal(put.status, 201);
        await put.body?.cancel();
        await pushTarImage(s.url, "alpha/two", "v1", [layer]);
        const browser = await launch();
        try {
          const page = await browser.newPage();
          await page.goto(`${s.url}/`);
          await page.waitForSelector("tr[data-repository]");
          assert.equal(await page.textContent("header .brand"), "Dock 7");
          assert.equal(await page.title(), "Dock 7");
          for (const theme of ["light", "dark"] as const) {
            await pickTheme(page, theme);
            await assertAccessible(page, `repositories, ${theme}`);
            await screenshot(page, `repositories-${theme}`);
          }
          await pickTheme(page, "system");
          const rows = await page.$$eval(
            "tr[data-repository]",
            (trs) => trs.map((tr) => Array.from(tr.querySelectorAll("td"), (td) => td.textContent)),
          );
          assert.deepEqual(rows, [
            ["alpha", "hosted", "", "2"],
            ["zetaimmutable", "hosted", "", "1"],
            ["cache", "pull-through cache", up.url, "1"],
          ]);
          // repository → its namespaces → a namespace's manifests, by clicking
          await page.click('tr[data-repository="alpha"] a');
          await page.waitForSelector("tr[data-namespace]");
          assert.equal(new URL(page.url()).pathname, "/alpha");
          await assertAccessible(page, "namespaces");
          assert.deepEqual(
            await page.$$eval("tr[data-namespace]", (trs) => trs.map((tr) => tr.textContent)),
            ["alpha/one320", "alpha/two110"],
          );
          await page.click('tr[data-namespace="alpha/one"] a');
          await page.waitForSelector("tr[data-digest]");
          assert.equal(new URL(page.url()).pathname, "/alpha/one");
          for (const theme of ["light", "dark"] as const) {
            await pickTheme(page, theme);
            await assertAccessible(page, `manifests, ${theme}`);
            await screenshot(page, `manifests-${theme}`);
          }
          await pickTheme(page, "system");
          // sizes and single-image platforms come with the listing, without a click
          assert.equal(await page.$("button:has-text('Show sizes')"), null);
          const sizes = await page.$$eval(
            "tr[data-digest] [data-size]",
            (tds) => tds.map((td) => td.textContent ?? ""),
          );
          assert.ok(sizes.length > 0 && sizes.every((t) => /\d (B|KiB)$/.test(t)), String(sizes));
          assert.deepEqual(
            await page.$$eval(
              "tr[data-digest] .badge.platform",
              (b) => b.map((x) => x.textContent),
            ),
            ["linux/amd64", "linux/amd64"],
          );
          await page.click("button:has-text('Total size')");
          await page.waitForSelector("[data-total]:has-text('in distinct blobs')");
          // two manifests, newest push first; the filter and the sort cover every entry
          const tagsShown = () =>
            page.$$eval("tr[data-digest] td:first-child", (tds) => tds.map((td) => td.textContent));
          assert.deepEqual(await tagsShown(), ["latestv2", "a1"]);
          await page.fill("main input[type=search]", "a1");
          assert.deepEqual(await tagsShown(), ["a1"]);
          assert.match((await page.textContent(".tools"))!, /1 of 2/);
          await page.fill("main input[type=search]", "");
          await page.selectOption("main select", "tag");
          assert.deepEqual(await tagsShown(), ["a1", "latestv2"]);
          // the platform column and the pull line of each row
          assert.ok(
            await page.$(`button[data-copy="docker pull 127.0.0.1:${s.port}/alpha/one:a1"]`),
          );
          // a deep link is the app too: manifest details by tag
          await page.goto(`${s.url}/alpha/one:a1`);
          await page.waitForSelector("section[data-manifest]");
          assert.match((await page.textContent("h1"))!, /alpha\/one:a1/);
        } finally {
          await browser.close();
        }
      })),
});
