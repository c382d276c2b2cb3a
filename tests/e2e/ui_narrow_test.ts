// The UI's rough edges of issue 27 in chromium: a CA bundle's certificates folded after a few
// with the text preview in reach; a deep link that clears the filter hiding its file and focuses
// it; tree and pane scrolling on their own; every view usable at 420 px (the page never wider
// than the window); the OS named by id and version without a pretty name; the top bar's image
// search; file search by name start.
import assert from "node:assert/strict";
import { drainQueues, withServer } from "../helpers/server.ts";
import { pushTarImage } from "../helpers/tar_image.ts";
import { tarOf } from "../helpers/tar.ts";
import { isFile, missingReason, runs } from "./_tools.ts";
import { assertAccessible, assertFits, CHROMIUM, launch, screenshot } from "./_browser.ts";

const skipReason = missingReason(
  "web UI narrow screens",
  [
    ...(isFile(CHROMIUM) ? [] : ["chromium"]),
    ...(runs("openssl", ["version"]) ? [] : ["openssl"]),
  ],
  "apt-get install chromium openssl",
);
const base = { ignore: skipReason !== null, sanitizeOps: false, sanitizeResources: false };
const CONFIG = `[ui]\nenabled = true\n[global.job_queue]\npoll_interval_ms = 100\n`;
const CERTS = 40;

/** A bundle of CERTS copies of one self-signed certificate, as a CA bundle is long. */
async function bundle(): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-narrow-" });
  try {
    const r = await new Deno.Command("openssl", {
      args: [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-subj",
        "/CN=bundle.test",
        "-days",
        "3650",
        "-keyout",
        `${dir}/k.pem`,
        "-out",
        `${dir}/c.pem`,
      ],
      stdout: "null",
      stderr: "piped",
    }).output();
    assert.ok(r.success, new TextDecoder().decode(r.stderr));
    return (await Deno.readTextFile(`${dir}/c.pem`)).repeat(CERTS);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test({
  ...base,
  name:
    "ui in chromium: folded certificates, deep links reveal their file, 420 px, OS id, searches",
  fn: () =>
    withServer({ config: CONFIG }, async (s) => {
      const ns = "narrow/app";
      const img = await pushTarImage(s.url, ns, "v1", [tarOf([
        { path: "etc", type: "5" },
        { path: "etc/os-release", data: 'ID=alpine\nVERSION_ID="3.20.1"\n' },
        { path: "etc/ssl", type: "5" },
        { path: "etc/ssl/certs", type: "5" },
        { path: "etc/ssl/certs/ca-certificates.crt", data: await bundle() },
        { path: "usr", type: "5" },
        { path: "usr/bin", type: "5" },
        { path: "usr/bin/hello.sh", data: "#!/bin/sh\necho hello\n" },
        ...Array.from({ length: 60 }, (_, i) => ({
          path: `usr/bin/tool-${String(i).padStart(2, "0")}`,
          data: `${i}`,
        })),
      ])]);
      await drainQueues(s.url);
      const browser = await launch();
      try {
        const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
        const at = (hash: string) => `${s.url}/${ns}:v1${hash}`;

        // a CA bundle: three certificates, the rest folded; the text preview in reach
        await page.goto(at("#filesystem/etc/ssl/certs/ca-certificates.crt"));
        await page.waitForSelector(".fs-certs table.fs-cert");
        assert.equal(await page.getAttribute(".fs-certs", "data-certs"), String(CERTS));
        assert.equal(await page.locator(".fs-certs > table.fs-cert").count(), 3);
        assert.equal(await page.locator("details.fs-cert-more[open]").count(), 0);
        assert.equal(await page.isVisible("details.fs-cert-more table.fs-cert"), false);
        await page.waitForSelector("#fs-preview .fs-line");
        const previewTop = await page.evaluate(() =>
          document.getElementById("fs-preview")!.getBoundingClientRect().top -
          document.querySelector(".fs-pane")!.getBoundingClientRect().top
        );
        assert.ok(previewTop < 1500, `the preview starts ${previewTop} px into the pane`);
        await page.click("a:has-text('Go to the text')");
        assert.equal(await page.evaluate(() => document.activeElement?.id), "fs-preview");
        await page.click("details.fs-cert-more > summary");
        assert.equal(await page.locator("details.fs-cert-more table.fs-cert").count(), CERTS - 3);
        // tree and pane scroll on their own
        const scrolls = await page.evaluate(() => {
          const pane = document.querySelector<HTMLElement>(".fs-pane")!;
          const tree = document.querySelector<HTMLElement>(".fs-tree")!;
          const before = tree.scrollTop;
          pane.scrollTop = 2000;
          return {
            pane: getComputedStyle(pane).overflowY,
            moved: pane.scrollTop > 0,
            tree: tree.scrollTop === before,
            page: scrollY,
          };
        });
        assert.deepEqual(scrolls, { pane: "auto", moved: true, tree: true, page: scrolls.page });
        await assertAccessible(page, "certificates folded");
        await screenshot(page, "filesystem-ca-bundle");

        // a deep link clears the filter that hides its file, then reveals and focuses it
        await page.goto(at("#filesystem"));
        await page.waitForSelector(".fs-tree .fs-row");
        await page.fill("input.fs-filter", "tool-0");
        await page.waitForSelector(".fs-row[data-path='usr/bin/tool-01']");
        assert.equal(await page.locator(".fs-row[data-path='usr/bin/hello.sh']").count(), 0);
        await page.evaluate(() => location.hash = "#filesystem/usr/bin/hello.sh");
        await page.waitForSelector(".fs-row.selected[data-path='usr/bin/hello.sh']");
        assert.equal(await page.inputValue("input.fs-filter"), "");
        assert.equal(
          await page.evaluate(() => document.activeElement?.classList.contains("fs-tree")),
          true,
        );
        assert.equal(await page.getAttribute(".fs-pane", "data-path"), "usr/bin/hello.sh");
        // opening a file the filter shows keeps the filter
        await page.fill("input.fs-filter", "tool-0");
        await page.click(".fs-row[data-path='usr/bin/tool-02']");
        await page.waitForSelector(".fs-pane[data-path='usr/bin/tool-02']");
        assert.equal(await page.inputValue("input.fs-filter"), "tool-0");

        // the OS by id and version when the report has no pretty name
        await page.goto(at("#vulnerabilities"));
        await page.waitForSelector("[data-os]");
        assert.equal(await page.textContent("[data-os]"), "alpine 3.20.1");

        // the top bar's image search: suggestions, the one match opens, several list
        await pushTarImage(s.url, "narrow/other", "v1", [tarOf([{ path: "x", data: "x" }])]);
        await page.goto(`${s.url}/`);
        await page.fill("form.image-search input", "narrow");
        await page.waitForSelector("datalist#image-names option", { state: "attached" });
        assert.deepEqual(
          await page.$$eval("datalist#image-names option", (os) =>
            os.map((o) => o.getAttribute("value"))),
          ["narrow/app", "narrow/other"],
        );
        await page.press("form.image-search input", "Enter");
        await page.waitForSelector("[data-section=image-results]");
        assert.equal(new URL(page.url()).pathname, "/_images");
        assert.deepEqual(
          await page.$$eval("[data-image]", (ls) =>
            ls.map((l) => l.getAttribute("data-image"))),
          ["narrow/app", "narrow/other"],
        );
        await assertAccessible(page, "image results");
        await page.fill("form.image-search input", "other");
        await page.press("form.image-search input", "Enter");
        await page.waitForSelector("tr[data-digest]");
        assert.equal(new URL(page.url()).pathname, "/narrow/other");

        // file search by a name's start: `hello` finds hello.sh
        await page.goto(`${s.url}/_search?name=hello`);
        await page.waitForSelector("[data-section=search-results] tr[data-result]");
        assert.deepEqual(
          await page.$$eval("[data-section=search-results] td code", (cs) =>
            cs.map((c) =>
              c.textContent
            )),
          ["usr/bin/hello.sh"],
        );

        // 420 px: every view fits the window
        await page.setViewportSize({ width: 420, height: 800 });
        const views: [string, string, string][] = [
          ["repositories", `${s.url}/`, "tr[data-repository]"],
          ["namespaces", `${s.url}/narrow`, "tr[data-namespace]"],
          ["manifests", `${s.url}/${ns}`, "tr[data-digest]"],
          ["details", at(""), "section[data-manifest]"],
          ["filesystem", at("#filesystem/etc/ssl/certs/ca-certificates.crt"), "table.fs-cert"],
          ["vulnerabilities", at("#vulnerabilities"), "[data-os]"],
          ["search", `${s.url}/_search?name=*.sh`, "tr[data-result]"],
          ["jobs", `${s.url}/_jobs`, "#jobs-title"],
          ["compare", `${s.url}/_compare/${ns}?from=v1&to=${img.digest}`, "[data-section=diff]"],
          ["not found", `${s.url}/${ns}:nope`, "[data-not-found]"],
        ];
        for (const [name, url, ready] of views) {
          await page.goto(url);
          await page.waitForSelector(ready, { timeout: 30_000 });
          await assertFits(page, `${name} at 420 px`);
          await screenshot(page, `narrow-420-${name.replace(/ /g, "-")}`);
        }
        await assertAccessible(page, "not found at 420 px");
      } finally {
        await browser.close();
      }
    }),
});
