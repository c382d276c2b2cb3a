// The web UI's manifest details in chromium against a real Wharf holding make-images.sh's images
// (a 3-layer image, a multi-platform index, an SBOM referrer) and a scanned image: the OCI tab,
// the tabs and their anchors, pull history, per-platform vulnerability reports with downloads,
// copy lines, the two-click delete with the index cascade (checked through the API), the theme,
// and axe-core on each view in both themes, with screenshots kept.
import assert from "node:assert/strict";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import type { Page } from "playwright-core";
import { req } from "../helpers/api.ts";
import { pushBlob, type TestServer, withServer } from "../helpers/server.ts";
import { tarOf } from "../helpers/tar.ts";
import { OCI_CONFIG, OCI_INDEX, OCI_MANIFEST } from "../helpers/oci_content.ts";
import { assertAccessible, browserSkipReason, launch, pickTheme, screenshot } from "./_browser.ts";
import { buildImages, type Images, missingTools, skopeoOk } from "./_skopeo.ts";

const skipReason = browserSkipReason ?? missingTools();
const images: Images | null = skipReason ? null : await buildImages();
globalThis.addEventListener("unload", () => images?.cleanup());
const base = { ignore: skipReason !== null, sanitizeOps: false, sanitizeResources: false };

const json = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));

async function put(s: TestServer, ns: string, ref: string, type: string, body: Uint8Array) {
  const r = await req(s, `/v2/${ns}/manifests/${ref}`, {
    method: "PUT",
    headers: { "content-type": type },
    body: body as BodyInit,
  });
  assert.equal(r.status, 201, await r.text());
  return r.headers.get("docker-content-digest")!;
}

const OS_RELEASE = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n' +
  "VERSION_CODENAME=bookworm\n";
const STATUS = [
  "Package: openssl",
  "Status: install ok installed",
  "Architecture: amd64",
  "Version: 3.0.11-1~deb12u1",
  "",
  "Package: zlib1g",
  "Status: install ok installed",
  "Architecture: amd64",
  "Source: zlib",
  "Version: 1:1.2.13.dfsg-1",
  "",
].join("\n");

async function writeAdvisories(dir: string) {
  const d = join(dir, "Debian");
  await Deno.mkdir(d, { recursive: true });
  const osv = (id: string, name: string, fixed: string, extra: Record<string, unknown>) =>
    JSON.stringify({
      id,
      modified: "2024-06-01T00:00:00Z",
      summary: `${id} in ${name}`,
      affected: [{
        package: { ecosystem: "Debian:12", name },
        ranges: [{ type: "ECOSYSTEM", events: [{ introduced: "0" }, { fixed }] }],
      }],
      ...extra,
    });
  await Deno.writeTextFile(
    join(d, "DEBIAN-CVE-2024-1000.json"),
    osv("DEBIAN-CVE-2024-1000", "openssl", "3.0.11-1~deb12u2", {
      severity: [{ type: "CVSS_V3", score: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H" }],
    }),
  );
  await Deno.writeTextFile(
    join(d, "DEBIAN-CVE-2024-1002.json"),
    osv("DEBIAN-CVE-2024-1002", "zlib", "1:1.2.13.dfsg-2", {
      database_specific: { severity: "medium" },
    }),
  );
}

/** A one-platform index over a Debian image whose packages the advisories above hit. */
async function pushScannable(s: TestServer, ns: string) {
  const layer = new Uint8Array(gzipSync(tarOf([
    { path: "etc", type: "5" },
    { path: "etc/os-release", data: OS_RELEASE },
    { path: "var/lib/dpkg", type: "5" },
    { path: "var/lib/dpkg/status", data: STATUS },
  ])));
  const cfg = json({ architecture: "amd64", os: "linux", rootfs: { type: "layers" } });
  const config = await pushBlob(s.url, ns, cfg);
  const layerDigest = await pushBlob(s.url, ns, layer);
  const manifest = json({
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    config: { mediaType: OCI_CONFIG, digest: config, size: cfg.length },
    layers: [{
      mediaType: "application/vnd.oci.image.layer.v1.tar+gzip",
      digest: layerDigest,
      size: layer.length,
    }],
  });
  const image = await put(s, ns, "image", OCI_MANIFEST, manifest);
  const index = await put(
    s,
    ns,
    "multi",
    OCI_INDEX,
    json({
      schemaVersion: 2,
      mediaType: OCI_INDEX,
      manifests: [{
        mediaType: OCI_MANIFEST,
        digest: image,
        size: manifest.length,
        platform: { os: "linux", architecture: "amd64" },
      }],
    }),
  );
  return { image, index };
}

const CONFIG = (adv: string) => `
[global]
update_pull_time = true
[global.job_queue]
poll_interval_ms = 100
[scan]
advisories_dir = ${JSON.stringify(adv)}
[ui]
enabled = true
`;

function img(): Images {
  assert.ok(images, "test images were not built");
  return images;
}

const docker = (s: TestServer, ref: string) => `docker://127.0.0.1:${s.port}/${ref}`;

async function texts(page: Page, selector: string): Promise<string[]> {
  return await page.$$eval(selector, (els) => els.map((e) => (e.textContent ?? "").trim()));
}

async function selectedTab(page: Page): Promise<string> {
  return await page.$eval(
    '[role=tab][aria-selected="true"]',
    (e) => e.getAttribute("data-tab-link")!,
  );
}

Deno.test({
  ...base,
  name: "ui in chromium: manifest details, tabs and anchors, history, reports, copy lines, a11y",
  fn: async () => {
    const adv = await Deno.makeTempDir({ prefix: "wharf-ui-adv-" });
    try {
      await writeAdvisories(adv);
      await withServer({ config: CONFIG(adv) }, async (s) => {
        const im = img();
        for (
          const [ref, dest, extra] of [
            ["v1", "e2e/app:v1", []],
            ["sbom", "e2e/app:sbom", []],
            ["multi", "e2e/multi:multi", ["--all"]],
          ] as const
        ) {
          await skopeoOk(
            [
              "copy",
              "--dest-tls-verify=false",
              "--preserve-digests",
              ...extra,
              `oci:${im.layout}:${ref}`,
              docker(s, dest),
            ],
            s,
          );
        }
        const scan = await pushScannable(s, "sec/app");
        const browser = await launch();
        try {
          const page = await browser.newPage();
          // by tag: the OCI tab, with config, layers, referrers and the copy lines
          await page.goto(`${s.url}/e2e/app:v1`);
          await page.waitForSelector("[data-tab=oci] table[data-section=layers]");
          assert.equal(await selectedTab(page), "oci");
          assert.deepEqual(await texts(page, "[role=tab]"), [
            "OCI",
            "Pull history",
            "Vulnerabilities",
            "Filesystem",
          ]);
          assert.equal(await page.textContent("code.digest-full"), im.v1.digest);
          assert.deepEqual(
            await page.$$eval(
              "tr[data-layer]",
              (trs) => trs.map((t) => t.getAttribute("data-layer")),
            ),
            im.v1.layers,
          );
          await page.waitForSelector(`tr[data-referrer="${im.sbom.digest}"]`);
          assert.match(
            (await page.textContent(`tr[data-referrer="${im.sbom.digest}"]`))!,
            new RegExp(im.sbom.artifactType.replace(/[.+]/g, "\\$&")),
          );
          assert.ok(
            await page.$(`button[data-copy="docker pull 127.0.0.1:${s.port}/e2e/app:v1"]`),
            "docker pull line",
          );
          assert.ok(
            await page.$(
              `button[data-copy="skopeo copy docker://127.0.0.1:${s.port}/e2e/app@${im.v1.digest} oci:app:v1"]`,
            ),
            "skopeo copy line",
          );
          await page.click("details:has(pre[data-section=config]) summary");
          assert.match((await page.textContent("pre[data-section=config]"))!, /"architecture"/);
          await assertAccessible(page, "details, OCI tab, light");
          await screenshot(page, "details-oci-light");
          await pickTheme(page, "dark");
          await assertAccessible(page, "details, OCI tab, dark");
          await screenshot(page, "details-oci-dark");
          // the theme outlives a reload (local storage)
          await page.reload();
          await page.waitForSelector("[data-tab=oci]");
          assert.equal(
            await page.evaluate(() => document.documentElement.getAttribute("data-theme")),
            "dark",
          );
          await pickTheme(page, "light");

          // an index: platform badges, and tabs it lacks fall back to OCI
          await page.goto(`${s.url}/e2e/multi:multi#filesystem/etc/passwd@L1`);
          await page.waitForSelector("table[data-section=children]");
          assert.equal(await selectedTab(page), "oci");
          assert.deepEqual(await texts(page, "[role=tab]"), [
            "OCI",
            "Pull history",
            "Vulnerabilities",
          ]);
          assert.deepEqual(await texts(page, "tr[data-child] .badge.platform"), [
            "linux/amd64",
            "linux/arm64",
          ]);
          // a child by digest, reached by a click
          await page.click(`tr[data-child="${im.multi.arm64}"] a`);
          await page.waitForSelector(`section[data-manifest="${im.multi.arm64}"]`);
          assert.equal(new URL(page.url()).pathname, `/e2e/multi@${im.multi.arm64}`);
          await page.goto(`${s.url}/e2e/app:v1#nonsense`);
          await page.waitForSelector("[data-tab=oci]");
          assert.equal(await selectedTab(page), "oci");

          // pull history: a client's pull, anonymous; the UI's own reads are not pulls
          // (X-Svc-No-Pull-Record), so the views opened above left no entry
          const before = await (await fetch(`${s.url}/v2/e2e/app/_svc/pulls/list?tag=v1`)).json();
          assert.deepEqual(before.entries, []);
          const pulled = await fetch(`${s.url}/v2/e2e/app/manifests/v1`, {
            headers: { accept: "application/vnd.oci.image.manifest.v1+json" },
          });
          assert.equal(pulled.status, 200);
          await pulled.body?.cancel();
          await page.click("[data-tab-link=history]");
          await page.waitForSelector("table[data-section=pulls] tbody tr");
          assert.equal(new URL(page.url()).hash, "#history");
          const clients = await texts(page, "table[data-section=pulls] tbody td:nth-child(2)");
          assert.ok(
            clients.length >= 1 && clients.every((c) => c === "anonymous"),
            String(clients),
          );
          await assertAccessible(page, "details, history tab");
          // a tag never pulled says why it has no entries
          await page.goto(`${s.url}/e2e/app@${im.sbom.digest}#history`);
          await page.waitForSelector("[data-tab=history]");
          assert.equal(await selectedTab(page), "history");

          // vulnerabilities of an index: per-platform summaries, then one platform's report
          await page.goto(`${s.url}/sec/app:multi#vulnerabilities`);
          await page.waitForSelector('tr[data-platform="linux/amd64"] a', { timeout: 60_000 });
          await page.click('tr[data-platform="linux/amd64"] a');
          assert.equal(new URL(page.url()).hash, "#vulnerabilities/linux/amd64");
          await page.waitForSelector(`[data-report="${scan.image}"] table[data-section=findings]`, {
            timeout: 60_000,
          });
          assert.equal(await page.textContent("li[data-severity=CRITICAL] strong"), "1");
          assert.equal(await page.textContent("li[data-severity=MEDIUM] strong"), "1");
          assert.deepEqual(
            await page.$$eval(
              "tr[data-finding]",
              (trs) => trs.map((t) => t.getAttribute("data-finding")),
            ),
            ["DEBIAN-CVE-2024-1000", "DEBIAN-CVE-2024-1002"],
          );
          await page.fill("[data-report] input[type=search]", "zlib");
          assert.deepEqual(
            await page.$$eval(
              "tr[data-finding]",
              (trs) => trs.map((t) => t.getAttribute("data-finding")),
            ),
            ["DEBIAN-CVE-2024-1002"],
          );
          await page.fill("[data-report] input[type=search]", "");
          await page.selectOption("[data-report] select", "id");
          await assertAccessible(page, "details, vulnerabilities tab");
          await screenshot(page, "details-vulnerabilities-light");
          // the CSV download carries the findings
          const [download] = await Promise.all([
            page.waitForEvent("download"),
            page.click("text=Download CSV"),
          ]);
          const csv = await Deno.readTextFile((await download.path())!);
          assert.match(csv, /DEBIAN-CVE-2024-1000/);
          const [sbom] = await Promise.all([
            page.waitForEvent("download"),
            page.click("text=Download SBOM (CycloneDX)"),
          ]);
          assert.equal(
            JSON.parse(await Deno.readTextFile((await sbom.path())!)).bomFormat,
            "CycloneDX",
          );
          // a deep link straight to the platform report; an absent platform says so
          await page.goto(`${s.url}/sec/app:multi#vulnerabilities/linux/amd64`);
          await page.waitForSelector(`[data-report="${scan.image}"]`);
          await page.goto(`${s.url}/sec/app:multi#vulnerabilities/windows/amd64`);
          await page.waitForSelector("text=This index has no windows/amd64 image.");
        } finally {
          await browser.close();
        }
      });
    } finally {
      await Deno.remove(adv, { recursive: true });
    }
  },
});
