// The web UI's vulnerability report without advisory data (issue 27 §1): the "no advisory data"
// note comes with how to load it (downloads, the offline fetch, status) and a link to OSV's
// dumps. A report matched against no advisory record (issue 33 §5) reads "Not checked: <reason>"
// with that help, never "No known vulnerabilities", in the report and in an index's platform
// table; a checked report without findings reads clean. In chromium, with axe-core and
// screenshots.
import assert from "node:assert/strict";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { req } from "../helpers/api.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { tarOf } from "../helpers/tar.ts";
import { pushTarImage, pushTarIndex } from "../helpers/tar_image.ts";
import { assertAccessible, browserSkipReason, launch, screenshot } from "./_browser.ts";

const base = { ignore: browserSkipReason !== null, sanitizeOps: false, sanitizeResources: false };

const OS_RELEASE = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n';
const STATUS = "Package: openssl\nStatus: install ok installed\nArchitecture: amd64\n" +
  "Version: 3.0.11-1~deb12u1\n";
const UBUNTU = 'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nID=ubuntu\nVERSION_ID="22.04"\n';

/** An image with an os-release and one dpkg package, under `ns:v1`. */
function pushDpkgImage(s: TestServer, ns: string, osRelease = OS_RELEASE) {
  return pushTarImage(s.url, ns, "v1", [
    tarOf([
      { path: "etc/os-release", data: osRelease },
      { path: "var/lib/dpkg/status", data: STATUS },
    ]),
  ]);
}

/** Waits until the image's report is made (and not being redone), so the page shows it at once. */
async function reportMade(
  s: TestServer,
  ns: string,
  digest: string,
  ready: (body: Record<string, unknown>) => boolean = () => true,
): Promise<Record<string, unknown>> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const r = await req(s, `/v2/${ns}/_svc/vulnerabilities/${digest}`);
    const body = await r.json();
    if (r.status === 200 && !body.refreshing && ready(body)) return body;
    if (Date.now() > deadline) assert.fail(`no report: ${r.status}\n${s.output().slice(-3000)}`);
    await new Promise((res) => setTimeout(res, 200));
  }
}

/** The report's not-checked state says `reason`, with the help, and nothing reads clean. */
async function assertNotCheckedShown(page: Page, reason: string): Promise<void> {
  const state = page.locator(".report [data-not-checked]");
  await state.waitFor();
  const text = (await state.textContent()) ?? "";
  assert.ok(text.startsWith(`Not checked: ${reason}.`), text);
  assert.equal(await page.locator(".report details.advisory-help").count(), 1);
  assert.equal(await page.locator(".report [data-clean]").count(), 0);
  const all = (await page.locator(".report").textContent()) ?? "";
  assert.ok(!all.includes("No known vulnerabilities"), all);
  assert.equal(await page.locator(".report ul.severity-counts").count(), 0, "no zero counts");
}

Deno.test({
  ...base,
  name: "ui in chromium: a report without advisory data says how to load it",
  fn: async () => {
    await withServer({
      config: `[global.job_queue]\npoll_interval_ms = 100\n[ui]\nenabled = true\n`,
    }, async (s) => {
      const img = await pushDpkgImage(s, "plain/deb");
      // The report is made before the page asks for it, so the page shows it at once.
      const body = await reportMade(s, "plain/deb", img.digest);
      assert.equal(body.advisories, null);
      assert.equal(body.vulnerabilities_checked, false);
      // An index of it: its platform table says "Not checked" instead of zero counts.
      await pushTarIndex(s.url, "plain/deb", "multi", img);
      const browser = await launch();
      try {
        const page = await browser.newPage();
        await page.goto(`${s.url}/plain/deb:v1#vulnerabilities`);
        await assertNotCheckedShown(page, "no advisory data is loaded");
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

        // The index's platform table, and the platform's report under it.
        await page.goto(`${s.url}/plain/deb:multi#vulnerabilities/linux/amd64`);
        const cell = page.locator(
          '[data-section="platform-reports"] tr[data-platform="linux/amd64"] [data-not-checked]',
        );
        await cell.waitFor();
        assert.equal(
          (await cell.textContent())?.trim(),
          "Not checked: no advisory data is loaded",
        );
        assert.equal(
          await page.locator('[data-section="platform-reports"] ul.severity-counts').count(),
          0,
        );
        await assertNotCheckedShown(page, "no advisory data is loaded");
        await assertAccessible(page, "index report without advisories");
      } finally {
        await browser.close();
      }
    });
  },
});

Deno.test({
  ...base,
  name:
    "ui in chromium: a snapshot without the image's ecosystem reads 'Not checked'; a checked image without findings reads clean",
  fn: async () => {
    const adv = await Deno.makeTempDir({ prefix: "wharf-adv-ui-" });
    try {
      // Debian 12 records only (of a package neither image has): the Debian image is checked and
      // clean, the Ubuntu one is not checked at all.
      await Deno.mkdir(join(adv, "Debian"));
      await Deno.writeTextFile(
        join(adv, "Debian", "DEBIAN-1.json"),
        JSON.stringify({
          id: "DEBIAN-1",
          modified: "2024-06-01T00:00:00Z",
          affected: [{
            package: { ecosystem: "Debian:12", name: "curl" },
            ranges: [{ type: "ECOSYSTEM", events: [{ introduced: "0" }, { fixed: "9.9-1" }] }],
          }],
        }),
      );
      await withServer({
        config: `[global.job_queue]\npoll_interval_ms = 100\n[ui]\nenabled = true\n` +
          `[scan]\nadvisories_dir = ${JSON.stringify(adv)}\n`,
      }, async (s) => {
        const loaded = (b: Record<string, unknown>) => b.advisories !== null;
        const deb = await pushDpkgImage(s, "chk/deb");
        const ubu = await pushDpkgImage(s, "chk/ubuntu", UBUNTU);
        assert.equal(
          (await reportMade(s, "chk/deb", deb.digest, loaded)).vulnerabilities_checked,
          true,
        );
        assert.equal(
          (await reportMade(s, "chk/ubuntu", ubu.digest, loaded)).vulnerabilities_checked,
          false,
        );
        const browser = await launch();
        try {
          const page = await browser.newPage();
          await page.goto(`${s.url}/chk/ubuntu:v1#vulnerabilities`);
          await assertNotCheckedShown(page, "the advisory snapshot holds no records for Ubuntu");
          await screenshot(page, "details-vulnerabilities-not-checked");

          await page.goto(`${s.url}/chk/deb:v1#vulnerabilities`);
          const clean = page.locator(".report [data-clean]");
          await clean.waitFor();
          assert.equal(
            (await clean.textContent())?.trim(),
            "No known vulnerabilities in 1 packages.",
          );
          assert.equal(await page.locator(".report [data-not-checked]").count(), 0);
          assert.equal(await page.locator(".report details.advisory-help").count(), 0);
          assert.equal(await page.locator(".report ul.severity-counts").count(), 1);
          await assertAccessible(page, "checked report without findings");
        } finally {
          await browser.close();
        }
      });
    } finally {
      await Deno.remove(adv, { recursive: true });
    }
  },
});
