// Image reports over HTTP (docs/api.md#image-reports): an image built here with a Debian
// package database and a config carrying credentials, OSV fixture files with fixed and
// unfixed versions whose epochs and tildes trip naive comparisons, the 202 → 200 sequence, the
// exact findings, the index summary, the CSV/CycloneDX/SPDX formats, filters, the 404 rules,
// and a server without advisories listing packages only.
import assert from "node:assert/strict";
import { gzipSync } from "node:zlib";
import { join } from "node:path";
import { assertErrorCode, req, serverTestOpts } from "../helpers/api.ts";
import { pushBlob, runCli, type TestServer, withServer } from "../helpers/server.ts";
import { jsonBytes, OCI_CONFIG, OCI_INDEX, OCI_MANIFEST } from "../helpers/oci_content.ts";
import { tarOf } from "../helpers/tar.ts";
import { pushTarImage } from "../helpers/tar_image.ts";

const FAST = `
[global.job_queue]
poll_interval_ms = 100
backoff_min_ms = 100
backoff_max_ms = 300
lease_secs = 3
`;

const OS_RELEASE = `PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
`;

const stanza = (f: Record<string, string>) =>
  Object.entries(f).map(([k, v]) => `${k}: ${v}`).join("\n") + "\n";

const STATUS_V1 = [
  stanza({
    Package: "openssl",
    Status: "install ok installed",
    Architecture: "amd64",
    Version: "3.0.11-1~deb12u1",
  }),
  stanza({
    Package: "libssl3",
    Status: "install ok installed",
    Architecture: "amd64",
    Source: "openssl",
    Version: "3.0.11-1~deb12u1",
  }),
  stanza({
    Package: "zlib1g",
    Status: "install ok installed",
    Architecture: "amd64",
    Source: "zlib",
    Version: "1:1.2.13.dfsg-1",
  }),
  stanza({
    Package: "tzdata",
    Status: "deinstall ok config-files",
    Architecture: "all",
    Version: "2024a-0+deb12u1",
  }),
].join("\n");

// The second layer rewrites the database: bash (a binNMU: its source version differs) and a
// pre-release with a tilde join.
const STATUS_V2 = STATUS_V1 + "\n" + [
  stanza({
    Package: "bash",
    Status: "install ok installed",
    Architecture: "amd64",
    Source: "bash (5.2.15-2)",
    Version: "5.2.15-2+b2",
  }),
  stanza({
    Package: "libfoo",
    Status: "install ok installed",
    Architecture: "amd64",
    Version: "2.0~rc1-1",
  }),
].join("\n");

const osv = (
  id: string,
  eco: string,
  name: string,
  events: object[],
  extra: Record<string, unknown> = {},
) =>
  JSON.stringify({
    id,
    modified: "2024-06-01T00:00:00Z",
    summary: `${id} in ${name}`,
    affected: [{ package: { ecosystem: eco, name }, ranges: [{ type: "ECOSYSTEM", events }] }],
    ...extra,
  });

const CRITICAL = [{ type: "CVSS_V3", score: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H" }];

async function writeAdvisories(dir: string): Promise<void> {
  const d = join(dir, "Debian");
  await Deno.mkdir(d, { recursive: true });
  const files: Record<string, string> = {
    // affected: ~deb12u1 < ~deb12u2; reported for openssl and libssl3 (source openssl)
    "DEBIAN-CVE-2024-1000.json": osv("DEBIAN-CVE-2024-1000", "Debian:12", "openssl", [
      { introduced: "0" },
      { fixed: "3.0.11-1~deb12u2" },
    ], { aliases: ["CVE-2024-1000"], severity: CRITICAL }),
    // not affected: fixed in exactly the installed version
    "DEBIAN-CVE-2024-1001.json": osv("DEBIAN-CVE-2024-1001", "Debian:12", "openssl", [
      { introduced: "0" },
      { fixed: "3.0.11-1~deb12u1" },
    ]),
    // affected: epoch 1 on both sides
    "DEBIAN-CVE-2024-1002.json": osv("DEBIAN-CVE-2024-1002", "Debian:12", "zlib", [
      { introduced: "0" },
      { fixed: "1:1.2.13.dfsg-2" },
    ], { database_specific: { severity: "medium" } }),
    // not affected: without an epoch 1.2.14 is older than 1:1.2.13 (a string compare says yes)
    "DEBIAN-CVE-2024-1003.json": osv("DEBIAN-CVE-2024-1003", "Debian:12", "zlib", [
      { introduced: "0" },
      { fixed: "1.2.14" },
    ]),
    // affected by the source version 5.2.15-2 (the binary's +b2 would not be)
    "DEBIAN-CVE-2024-1004.json": osv("DEBIAN-CVE-2024-1004", "Debian:12", "bash", [
      { introduced: "0" },
      { fixed: "5.2.15-2+deb12u1" },
    ], { database_specific: { severity: "low" } }),
    // affected: 2.0~rc1 sorts before 2.0
    "DEBIAN-CVE-2024-1005.json": osv("DEBIAN-CVE-2024-1005", "Debian:12", "libfoo", [
      { introduced: "0" },
      { fixed: "2.0-1" },
    ]),
    // another release: not this image's
    "DEBIAN-CVE-2024-1006.json": osv("DEBIAN-CVE-2024-1006", "Debian:11", "openssl", [
      { introduced: "0" },
    ]),
    // a package the image does not have
    "DEBIAN-CVE-2024-1007.json": osv("DEBIAN-CVE-2024-1007", "Debian:12", "curl", [
      { introduced: "0" },
    ]),
  };
  for (const [n, t] of Object.entries(files)) await Deno.writeTextFile(join(d, n), t);
  await Deno.writeTextFile(join(d, "garbage.json"), "not json at all");
}

const SECRET = "wJalrXUtnFEMIK7MDENGbPxRfiCYzzzzzzzzzzzz";
const TOKEN = "ghp_" + "aB3".repeat(12);

async function pushScannable(
  s: TestServer,
  ns: string,
): Promise<{ digest: string; index: string; config: string }> {
  const l1 = tarOf([
    { path: "etc", type: "5" },
    { path: "usr/lib", type: "5" },
    { path: "usr/lib/os-release", data: OS_RELEASE },
    { path: "etc/os-release", type: "2", link: "../usr/lib/os-release" },
    { path: "var/lib/dpkg", type: "5" },
    { path: "var/lib/dpkg/status", data: STATUS_V1 },
  ]);
  const l2 = tarOf([{ path: "var/lib/dpkg/status", data: STATUS_V2 }]);
  const cfg = jsonBytes({
    architecture: "amd64",
    os: "linux",
    config: { Env: ["PATH=/usr/bin", `AWS_SECRET_ACCESS_KEY=${SECRET}`] },
    history: [
      { created_by: "/bin/sh -c #(nop) ADD file:abc in /" },
      { created_by: `RUN curl -H 'Authorization: token ${TOKEN}' https://x` },
    ],
  });
  const config = await pushBlob(s.url, ns, cfg);
  const layers = [];
  for (const t of [l1, l2]) {
    const b = new Uint8Array(gzipSync(t));
    layers.push({
      mediaType: "application/vnd.oci.image.layer.v1.tar+gzip",
      digest: await pushBlob(s.url, ns, b),
      size: b.length,
    });
  }
  const manifest = jsonBytes({
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    config: { mediaType: OCI_CONFIG, digest: config, size: cfg.length },
    layers,
  });
  let r = await req(s, `/v2/${ns}/manifests/v1`, {
    method: "PUT",
    headers: { "content-type": OCI_MANIFEST },
    body: manifest as BodyInit,
  });
  assert.equal(r.status, 201, await r.text());
  const digest = r.headers.get("docker-content-digest")!;
  const index = jsonBytes({
    schemaVersion: 2,
    mediaType: OCI_INDEX,
    manifests: [{
      mediaType: OCI_MANIFEST,
      digest,
      size: manifest.length,
      platform: { os: "linux", architecture: "amd64" },
    }],
  });
  r = await req(s, `/v2/${ns}/manifests/multi`, {
    method: "PUT",
    headers: { "content-type": OCI_INDEX },
    body: index as BodyInit,
  });
  assert.equal(r.status, 201, await r.text());
  return { digest, index: r.headers.get("docker-content-digest")!, config };
}

const vuln = (ns: string, digest: string, q = "") => `/v2/${ns}/_svc/vulnerabilities/${digest}${q}`;

async function settle(s: TestServer, path: string, ms = 60_000): Promise<Response> {
  const deadline = Date.now() + ms;
  for (;;) {
    const r = await req(s, path);
    if (r.status !== 202) return r;
    assert.deepEqual(await r.json(), { status: "scanning" });
    if (Date.now() > deadline) assert.fail(`still 202 after ${ms} ms\n${s.output().slice(-3000)}`);
    await new Promise((res) => setTimeout(res, 150));
  }
}

Deno.test({
  ...serverTestOpts,
  name: "reports API: packages from the merged filesystem, exact findings, config secrets, formats",
  fn: async () => {
    const adv = await Deno.makeTempDir({ prefix: "wharf-adv-" });
    try {
      await writeAdvisories(adv);
      await withServer({
        config: `${FAST}\n[scan]\nadvisories_dir = ${JSON.stringify(adv)}\n`,
      }, async (s) => {
        const img = await pushScannable(s, "sec/app");
        const first = await req(s, vuln("sec/app", img.digest));
        assert.ok([200, 202].includes(first.status), String(first.status));
        await first.body?.cancel();
        // Wait until the report uses the advisories (the load runs beside the first scan).
        let report;
        for (let i = 0;; i++) {
          const r = await settle(s, vuln("sec/app", img.digest));
          assert.equal(r.status, 200, await r.clone().text());
          report = await r.json();
          if (report.advisories && !report.refreshing) break;
          if (i > 400) assert.fail(`report never used the advisories: ${JSON.stringify(report)}`);
          await new Promise((res) => setTimeout(res, 150));
        }
        assert.equal(report.digest, img.digest);
        assert.deepEqual(report.platform, { os: "linux", architecture: "amd64" });
        assert.equal(report.os.id, "debian");
        assert.equal(report.os.version_id, "12");
        const pkgs = report.packages.map((p: { name: string; version: string }) =>
          `${p.name}=${p.version}`
        ).sort();
        assert.deepEqual(pkgs, [
          "bash=5.2.15-2+b2",
          "libfoo=2.0~rc1-1",
          "libssl3=3.0.11-1~deb12u1",
          "openssl=3.0.11-1~deb12u1",
          "zlib1g=1:1.2.13.dfsg-1",
        ]);
        const got = report.findings.map((f: Record<string, unknown>) =>
          [f.id, f.package, f.installed, f.fixed, f.severity].join(" ")
        );
        assert.deepEqual(got, [
          "DEBIAN-CVE-2024-1000 libssl3 3.0.11-1~deb12u1 3.0.11-1~deb12u2 CRITICAL",
          "DEBIAN-CVE-2024-1000 openssl 3.0.11-1~deb12u1 3.0.11-1~deb12u2 CRITICAL",
          "DEBIAN-CVE-2024-1002 zlib1g 1:1.2.13.dfsg-1 1:1.2.13.dfsg-2 MEDIUM",
          "DEBIAN-CVE-2024-1004 bash 5.2.15-2+b2 5.2.15-2+deb12u1 LOW",
          "DEBIAN-CVE-2024-1005 libfoo 2.0~rc1-1 2.0-1 UNKNOWN",
        ]);
        assert.deepEqual(report.counts, { CRITICAL: 2, HIGH: 0, MEDIUM: 1, LOW: 1, UNKNOWN: 1 });
        const f0 = report.findings[0];
        assert.deepEqual(f0.aliases, ["CVE-2024-1000"]);
        assert.equal(f0.summary, "DEBIAN-CVE-2024-1000 in openssl");
        // Config credentials: reported by kind and place, never echoed.
        assert.deepEqual(report.config_secrets, [
          { source: "env", index: 1, name: "AWS_SECRET_ACCESS_KEY", kind: "cloudA-credentials" },
          { source: "history", index: 1, kind: "hostA-token" },
        ]);
        const raw = JSON.stringify(report);
        assert.ok(!raw.includes(SECRET) && !raw.includes(TOKEN), "a secret value leaked");

        // Filters and sorting.
        const high = await (await req(s, vuln("sec/app", img.digest, "?severity=critical,low")))
          .json();
        assert.deepEqual(
          high.findings.map((f: { id: string; package: string }) => `${f.id}/${f.package}`),
          [
            "DEBIAN-CVE-2024-1000/libssl3",
            "DEBIAN-CVE-2024-1000/openssl",
            "DEBIAN-CVE-2024-1004/bash",
          ],
        );
        const byPkg = await (await req(s, vuln("sec/app", img.digest, "?sort=package"))).json();
        assert.deepEqual(
          byPkg.findings.map((f: { package: string }) => f.package),
          ["bash", "libfoo", "libssl3", "openssl", "zlib1g"],
        );

        // CSV
        const csv = await req(s, vuln("sec/app", img.digest, "?format=csv"));
        assert.equal(csv.status, 200);
        assert.match(csv.headers.get("content-type")!, /^text\/csv/);
        const lines = (await csv.text()).trim().split("\r\n");
        assert.equal(lines[0], "id,severity,package,installed,fixed,aliases,summary");
        assert.equal(lines.length, 8);
        // The config's credentials close it, each kind with what it matches in plain words.
        assert.deepEqual(lines.slice(6), [
          "SECRET,UNKNOWN,,,,,cloudA-credentials (cloud secret access key — a secret access key line set to a 40-character key) in environment variable AWS_SECRET_ACCESS_KEY",
          `SECRET,UNKNOWN,,,,,"hostA-token (code host access token — a token starting ghp_, gho_, ghu_, ghs_, ghr_ or <host>_pat_, mixing letters and digits) in history line 2"`,
        ]);
        assert.equal(
          lines[1],
          "DEBIAN-CVE-2024-1000,CRITICAL,libssl3,3.0.11-1~deb12u1,3.0.11-1~deb12u2,CVE-2024-1000,DEBIAN-CVE-2024-1000 in openssl",
        );
        // CycloneDX and SPDX SBOMs of the inventory
        const cdx = await (await req(s, vuln("sec/app", img.digest, "?format=cyclonedx"))).json();
        assert.equal(cdx.bomFormat, "CycloneDX");
        assert.equal(cdx.specVersion, "1.5");
        const purls = cdx.components.map((c: { purl: string }) => c.purl).sort();
        assert.ok(
          purls.includes(
            "pkg:deb/debian/zlib1g@1%3A1.2.13.dfsg-1?arch=amd64&distro=debian-12&upstream=zlib",
          ),
          purls.join("\n"),
        );
        assert.equal(cdx.components.length, 5);
        assert.equal(cdx.vulnerabilities.length, 5);
        const spdx = await (await req(s, vuln("sec/app", img.digest, "?format=spdx"))).json();
        assert.equal(spdx.spdxVersion, "SPDX-2.3");
        assert.equal(spdx.packages.length, 6, "the image and its 5 packages");
        assert.equal(
          spdx.relationships.filter((r: { relationshipType: string }) =>
            r.relationshipType === "CONTAINS"
          ).length,
          5,
        );

        // The index: one summary per platform, linking to its report. A rescan queued by the
        // advisory load may land meanwhile: the summary shows the platform report of its time.
        const idx = await (await req(s, vuln("sec/app", img.index))).json();
        const now = await (await req(s, vuln("sec/app", img.digest))).json();
        assert.ok(idx.manifests[0].scanned_at >= report.scanned_at, idx.manifests[0].scanned_at);
        assert.ok(idx.manifests[0].scanned_at <= now.scanned_at, idx.manifests[0].scanned_at);
        assert.deepEqual(idx.manifests, [{
          digest: img.digest,
          platform: { os: "linux", architecture: "amd64" },
          status: "ready",
          counts: report.counts,
          scanned_at: idx.manifests[0].scanned_at,
          report: `/v2/sec/app/_svc/vulnerabilities/${img.digest}`,
        }]);

        // 404s: bad query values, an unknown manifest, a blob that is not a manifest, another
        // namespace, an index asked for CSV.
        for (
          const q of ["?format=xml", "?severity=SEVERE", "?sort=cvss", "?format=csv&format=json"]
        ) {
          await assertErrorCode(await req(s, vuln("sec/app", img.digest, q)), 404, "NAME_UNKNOWN");
        }
        await assertErrorCode(
          await req(s, vuln("sec/app", `sha256:${"0".repeat(64)}`)),
          404,
          "MANIFEST_UNKNOWN",
        );
        await assertErrorCode(await req(s, vuln("sec/app", img.config)), 404, "MANIFEST_UNKNOWN");
        await assertErrorCode(await req(s, vuln("other/app", img.digest)), 404, "MANIFEST_UNKNOWN");
        await assertErrorCode(
          await req(s, vuln("sec/app", img.index, "?format=csv")),
          404,
          "NAME_UNKNOWN",
        );
        await assertErrorCode(await req(s, vuln("sec/app", "sha256:zz")), 400, "DIGEST_INVALID");
        const post = await req(s, vuln("sec/app", img.digest), { method: "POST" });
        assert.equal(post.status, 400);
        await post.body?.cancel();

        // scan --status names the snapshot and its problems.
        const st = await runCli(s, "scan", ["--status"]);
        assert.equal(st.code, 0, st.stderr);
        assert.match(st.stdout, /8 records, 8 package entries; 1 problem/);
        assert.match(st.stdout, /Debian:12: 7/);
        assert.match(st.stdout, /garbage\.json: not JSON/);
        // scan --rescan queues the image again; without it nothing is stale.
        const none = await runCli(s, "scan", ["--dry-run"]);
        assert.match(none.stdout, /would queue 0 image/);
        const all = await runCli(s, "scan", ["--rescan", "--dry-run"]);
        assert.match(all.stdout, /would queue 1 image/);
      });
    } finally {
      await Deno.remove(adv, { recursive: true });
    }
  },
});

Deno.test({
  ...serverTestOpts,
  name: "reports API: without advisories a report lists packages and says no data is loaded",
  fn: () =>
    withServer({ config: FAST }, async (s) => {
      const img = await pushScannable(s, "plain/app");
      const r = await settle(s, vuln("plain/app", img.digest));
      assert.equal(r.status, 200);
      const report = await r.json();
      assert.equal(report.advisories, null);
      assert.match(report.note, /no advisory data is loaded/);
      assert.equal(report.packages.length, 5);
      assert.deepEqual(report.findings, []);
      assert.deepEqual(report.counts, { CRITICAL: 0, HIGH: 0, MEDIUM: 0, LOW: 0, UNKNOWN: 0 });
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "reports API: a config that is not an image, random-byte layers and no package db",
  fn: () =>
    withServer({ config: FAST }, async (s) => {
      // Layers that are not tar: indexed as unsupported; the report says so and lists nothing.
      const cfg = jsonBytes({ architecture: "arm64", os: "linux" });
      const config = await pushBlob(s.url, "odd/app", cfg);
      const junk = crypto.getRandomValues(new Uint8Array(5000));
      const layer = await pushBlob(s.url, "odd/app", junk);
      const m = jsonBytes({
        schemaVersion: 2,
        mediaType: OCI_MANIFEST,
        config: { mediaType: OCI_CONFIG, digest: config, size: cfg.length },
        layers: [{
          mediaType: "application/vnd.oci.image.layer.v1.tar+gzip",
          digest: layer,
          size: junk.length,
        }],
      });
      const put = await req(s, "/v2/odd/app/manifests/v1", {
        method: "PUT",
        headers: { "content-type": OCI_MANIFEST },
        body: m as BodyInit,
      });
      assert.equal(put.status, 201);
      const digest = put.headers.get("docker-content-digest")!;
      const r = await settle(s, vuln("odd/app", digest));
      assert.equal(r.status, 200);
      const report = await r.json();
      assert.equal(report.os, null);
      assert.deepEqual(report.packages, []);
      assert.ok(report.warnings.some((w: string) => w.includes("unsupported")), report.warnings);
      assert.deepEqual(report.platform, { os: "linux", architecture: "arm64" });
    }),
});

const pushLayers = (s: TestServer, ns: string, tag: string, tars: Uint8Array[]) =>
  pushTarImage(s.url, ns, tag, tars, { tag });

Deno.test({
  ...serverTestOpts,
  name: "diff API: added, removed and modified paths with their layers; waste and efficiency",
  fn: () =>
    withServer({ config: FAST }, async (s) => {
      const base = tarOf([
        { path: "a.txt", data: "aaaa" },
        { path: "b.txt", data: "bb" },
        { path: "d", type: "5" },
        { path: "d/x", data: "x" },
        { path: "l", type: "2", link: "a.txt" },
      ]);
      const a = await pushLayers(s, "diff/app", "a", [
        base,
        tarOf([{ path: "a.txt", data: "AAAAAA" }, { path: ".wh.b.txt", data: "" }]),
      ]);
      const b = await pushLayers(s, "diff/app", "b", [
        base,
        tarOf([
          { path: "a.txt", data: "AAAAAA", mode: 0o755 },
          { path: "c.txt", data: "new" },
          { path: "d/.wh..wh..opq", data: "" },
        ]),
      ]);
      const path = "/v2/diff/app/_svc/diff?from=a&to=b";
      let r: Response;
      for (let i = 0;; i++) {
        r = await req(s, path);
        if (r.status !== 202) break;
        assert.deepEqual(await r.json(), { status: "indexing" });
        if (i > 300) assert.fail("diff still 202");
        await new Promise((res) => setTimeout(res, 100));
      }
      assert.equal(r.status, 200, await r.clone().text());
      const d = await r.json();
      const names = (xs: { path: string; layer: string }[]) =>
        xs.map((x) => `${x.path}@${x.layer}`);
      assert.deepEqual(names(d.added), [`b.txt@${b.layers[0]}`, `c.txt@${b.layers[1]}`]);
      assert.deepEqual(names(d.removed), [`d/x@${a.layers[0]}`]);
      assert.equal(d.modified.length, 1);
      assert.equal(d.modified[0].path, "a.txt");
      assert.deepEqual(d.modified[0].changes, ["mode"]);
      assert.equal(d.modified[0].from.layer, a.layers[1]);
      assert.equal(d.modified[0].to.layer, b.layers[1]);
      assert.equal(d.modified[0].from.sha256, d.modified[0].to.sha256);
      assert.deepEqual(
        [d.from.digest, d.from.total_bytes, d.from.wasted_bytes, d.from.efficiency],
        [a.digest, 13, 6, 0.5385],
      );
      assert.deepEqual(
        [d.to.digest, d.to.total_bytes, d.to.wasted_bytes, d.to.efficiency],
        [b.digest, 16, 5, 0.6875],
      );
      assert.equal(d.truncated, false);
      // n cuts each list and says so; digests work as refs.
      const cut = await (await req(s, `/v2/diff/app/_svc/diff?from=${a.digest}&to=b&n=1`)).json();
      assert.equal(cut.added.length, 1);
      assert.equal(cut.truncated, true);
      // bad queries 404; unknown refs MANIFEST_UNKNOWN
      for (
        const q of [
          "?from=a",
          "?to=b",
          "?from=a&to=b&n=0",
          "?from=a&to=b&n=x",
          "?from=a&from=a&to=b",
          "?from=%20&to=b",
        ]
      ) {
        await assertErrorCode(await req(s, `/v2/diff/app/_svc/diff${q}`), 404, "NAME_UNKNOWN");
      }
      await assertErrorCode(
        await req(s, "/v2/diff/app/_svc/diff?from=a&to=nope"),
        404,
        "MANIFEST_UNKNOWN",
      );
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "reports API: npm and Python packages matched against npm and PyPI advisories",
  fn: async () => {
    const adv = await Deno.makeTempDir({ prefix: "wharf-adv-lang-" });
    try {
      await Deno.mkdir(join(adv, "npm"), { recursive: true });
      await Deno.mkdir(join(adv, "PyPI"), { recursive: true });
      const semverOsv = (id: string, name: string, events: object[]) =>
        JSON.stringify({
          id,
          modified: "2024-06-01T00:00:00Z",
          summary: `${id} in ${name}`,
          affected: [{ package: { ecosystem: "npm", name }, ranges: [{ type: "SEMVER", events }] }],
        });
      const files: Record<string, string> = {
        // affected: 4.17.20 < 4.17.21, and the nested copy 3.10.1 too
        "npm/GHSA-lodash.json": semverOsv("GHSA-lodash", "lodash", [
          { introduced: "0" },
          { fixed: "4.17.21" },
        ]),
        // not affected: 3.10.1 is below the range's start, 4.17.20 past its fix
        "npm/GHSA-lodash-old.json": semverOsv("GHSA-lodash-old", "lodash", [
          { introduced: "4.0.0" },
          { fixed: "4.1.0" },
        ]),
        // affected: a prerelease sorts before its release
        "npm/GHSA-scoped.json": semverOsv("GHSA-scoped", "@acme/core", [
          { introduced: "0" },
          { fixed: "2.0.0" },
        ]),
        // affected: OSV spells the project `PyYAML`, the wheel `pyyaml`; 5.4rc1 < 5.4
        "PyPI/PYSEC-yaml.json": osv("PYSEC-yaml", "PyPI", "PyYAML", [
          { introduced: "0" },
          { fixed: "5.4" },
        ], { aliases: ["CVE-2020-14343"], severity: CRITICAL }),
        // not affected: 2.28.1 is the fixed version, and 2.28.1 > 2.3 (a string compare says no)
        "PyPI/PYSEC-requests.json": osv("PYSEC-requests", "PyPI", "requests", [
          { introduced: "0" },
          { fixed: "2.28.1" },
        ]),
        "PyPI/PYSEC-requests-2.json": osv("PYSEC-requests-2", "PyPI", "requests", [
          { introduced: "0" },
          { fixed: "2.3" },
        ]),
      };
      for (const [n, t] of Object.entries(files)) await Deno.writeTextFile(join(adv, n), t);
      const config = `${FAST}\n[scan]\nadvisories_dir = ${JSON.stringify(adv)}\n`;
      await withServer({ config }, async (s) => {
        const lock = JSON.stringify({
          lockfileVersion: 3,
          packages: {
            "node_modules/lodash": { version: "4.17.20" },
            "node_modules/a/node_modules/lodash": { version: "3.10.1" },
            "node_modules/@acme/core": { version: "2.0.0-beta.1" },
          },
        });
        const site = "usr/local/lib/python3.11/site-packages";
        const img = await pushLayers(s, "lang/app", "v1", [
          tarOf([
            { path: "app/node_modules/.package-lock.json", data: lock },
            { path: "app/package-lock.json", data: '{"lockfileVersion":3,"packages":{}}' },
            { path: `${site}/pyyaml-5.4rc1.dist-info/METADATA`, data: "Name: PyYAML\n" },
            { path: `${site}/requests-2.28.1.dist-info/METADATA`, data: "Name: requests\n" },
          ]),
        ]);
        let report;
        for (let i = 0; i < 300; i++) {
          const r = await settle(s, vuln("lang/app", img.digest));
          report = await r.json();
          if (report.advisories) break;
          await new Promise((res) => setTimeout(res, 100));
        }
        assert.ok(report.advisories, "advisories loaded");
        assert.deepEqual(
          report.packages.map((p: { type: string; name: string; version: string }) =>
            `${p.type} ${p.name} ${p.version}`
          ).sort(),
          [
            "npm @acme/core 2.0.0-beta.1",
            "npm lodash 3.10.1",
            "npm lodash 4.17.20",
            "pypi pyyaml 5.4rc1",
            "pypi requests 2.28.1",
          ],
        );
        assert.deepEqual(
          report.findings.map((f: Record<string, string>) =>
            `${f.id} ${f.package} ${f.installed} ${f.fixed} ${f.ecosystem} ${f.severity}`
          ),
          [
            "PYSEC-yaml pyyaml 5.4rc1 5.4 PyPI CRITICAL",
            "GHSA-scoped @acme/core 2.0.0-beta.1 2.0.0 npm UNKNOWN",
            "GHSA-lodash lodash 3.10.1 4.17.21 npm UNKNOWN",
            "GHSA-lodash lodash 4.17.20 4.17.21 npm UNKNOWN",
          ],
        );
        const sbom = await (await req(s, vuln("lang/app", img.digest, "?format=cyclonedx")))
          .json();
        const purls = sbom.components.map((c: { purl: string }) => c.purl).sort();
        assert.ok(purls.includes("pkg:npm/%40acme/core@2.0.0-beta.1"), purls);
        assert.ok(purls.includes("pkg:pypi/pyyaml@5.4rc1"), purls);
      });
    } finally {
      await Deno.remove(adv, { recursive: true });
    }
  },
});

Deno.test({
  ...serverTestOpts,
  name: "reports API: a push's scan-image job waits on the scan queue of the jobs admin API",
  fn: () =>
    // This process does not drain the scan queue: the job the push enqueued stays pending.
    withServer({ config: `${FAST}\n[global.job_queue.concurrency]\nscan = 0\n` }, async (s) => {
      const img = await pushScannable(s, "queued/app");
      let jobs: { kind: string; lock_key: string }[] = [];
      for (let i = 0; i < 100 && jobs.length === 0; i++) {
        jobs = (await (await req(s, "/v2/_svc/jobs/list?queue=scan")).json()).jobs;
        if (jobs.length === 0) await new Promise((res) => setTimeout(res, 100));
      }
      assert.equal(jobs.length, 1, JSON.stringify(jobs));
      assert.equal(jobs[0].kind, "scan-image");
      assert.equal(jobs[0].lock_key, img.digest);
      // ...and the report says it is still scanning
      const r = await req(s, vuln("queued/app", img.digest));
      assert.equal(r.status, 202);
      assert.deepEqual(await r.json(), { status: "scanning" });
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "reports API: a layer whose blob is not stored is named in the report, not waited for",
  fn: () =>
    withServer({ config: FAST }, async (s) => {
      const cfg = jsonBytes({ architecture: "amd64", os: "linux" });
      const config = await pushBlob(s.url, "thin/app", cfg);
      const real = new Uint8Array(gzipSync(tarOf([{ path: "etc/os-release", data: OS_RELEASE }])));
      const realDigest = await pushBlob(s.url, "thin/app", real);
      const absent = `sha256:${"ab".repeat(32)}`;
      const put = await req(s, "/v2/thin/app/manifests/v1", {
        method: "PUT",
        headers: { "content-type": OCI_MANIFEST },
        body: jsonBytes({
          schemaVersion: 2,
          mediaType: OCI_MANIFEST,
          config: { mediaType: OCI_CONFIG, digest: config, size: cfg.length },
          layers: [
            { mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: absent, size: 9 },
            {
              mediaType: "application/vnd.oci.image.layer.v1.tar+gzip",
              digest: realDigest,
              size: real.length,
            },
          ],
        }) as BodyInit,
      });
      assert.equal(put.status, 201, await put.text());
      const digest = put.headers.get("docker-content-digest")!;
      const t0 = Date.now();
      const r = await settle(s, vuln("thin/app", digest));
      assert.equal(r.status, 200);
      // well inside the minute a scan waits for an index that may still come
      assert.ok(Date.now() - t0 < 30_000, `${Date.now() - t0} ms`);
      const report = await r.json();
      assert.equal(report.os.id, "debian");
      assert.ok(
        report.warnings.some((w: string) => w.includes(absent) && /not stored/.test(w)),
        JSON.stringify(report.warnings),
      );
    }),
});
