// The web UI's vulnerability report without advisory data (issue 27 §1): the "no advisory data"
// note comes with how to load it (downloads, the offline fetch, status) and a link to OSV's
// dumps. In chromium, with axe-core and a screenshot.
import assert from "node:assert/strict";
import { req } from "../helpers/api.ts";
import { withServer } from "../helpers/server.ts";
import { tarOf } from "../helpers/tar.ts";
import { pushTarImage } from "../helpers/tar_image.ts";
import { assertAccessible, browserSkipReason, launch, screenshot } from "./_browser.ts";

const base = { ignore: browserSkipReason !== null, sanitizeOps: false, sanitizeResources: false };

const OS_RELEASE = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n';
const STATUS = "Package: openssl\nStatus: install ok installed\nArchitecture: amd64\n" +
  "Version: 3.0.11-1~deb12u1\n";

Deno.test({
  ...base,
  name: "ui in chromium: a report without advisory data says how to load it",
  fn: async () => {
    await withServer({
      config: `[global.job_queue]\npoll_interval_ms = 100\n[ui]\nenabled = true\n`,
    }, async (s) => {
      const img = await pushTarImage(s.url, "plain/deb", "v1", [
        tarOf([
          { path: "etc/os-release", data: OS_RELEASE },
          { path: "var/lib/dpkg/status", data: STATUS },
        ]),
      ]);
      // The report is made before the page asks for it, so the page shows it at once.
      const deadline = Date.now() + 60_000;
      for (;;) {
        const r = await req(s, `/v2/plain/deb/_svc/vulnerabilities/${img.digest}`);
        const body = await r.json();
        if (r.status === 200) {
          assert.equal(body.advisories, null);
          assert.match(body.note, /no advisory data is loaded/);
          break;
        }
        if (Date.now() > deadline) {
          assert.fail(`no report: ${r.status}\n${s.output().slice(-3000)}`);
        }
        await new Promise((res) => setTimeout(res, 200));
      }
      const browser = await launch();
      try {
        const page = await browser.newPage();
        await page.goto(`${s.url}/plain/deb:v1#vulnerabilities`);
        const help = page.locator("details.advisory-help");
        await help.waitFor();
        assert.equal(
          (await help.locator("summary").textContent())?.trim(),
          "How to load advisory data",
        );
        await help.locator("summary").click();
        const text = (await help.textContent()) ?? "";
        for (
          const want of [
            "refresh_interval_secs = 86400",
            "main.ts advisories fetch --dir osv --ecosystem Debian",
            "main.ts advisories status",
            "docs/scanning.md",
          ]
        ) assert.ok(text.includes(want), `missing ${want} in ${text}`);
        assert.equal(
          await help.locator("a").getAttribute("href"),
          "https://google.github.io/osv.dev/data/#data-dumps",
        );
        assert.ok(await help.locator("p").isVisible(), "the help opens");
        await assertAccessible(page, "report without advisories");
        await screenshot(page, "details-vulnerabilities-no-advisories");
      } finally {
        await browser.close();
      }
    });
  },
});
