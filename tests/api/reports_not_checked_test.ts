// "Never a false clean" (issue 33 §5, docs/scanning.md#not-checked): a report whose packages were
// matched against no advisory record says `vulnerabilities_checked: false` and why — no snapshot,
// a snapshot of no records, a snapshot without the image's ecosystem — in the JSON report, the
// index summary (no counts), CSV, CycloneDX and SPDX; a snapshot holding the image's ecosystem
// checks it, findings or not. A failed first download (offline) leaves no snapshot that status
// would call loaded.
import assert from "node:assert/strict";
import { join } from "node:path";
import { req, serverTestOpts } from "../helpers/api.ts";
import { runCli, type TestServer, withServer } from "../helpers/server.ts";
import { tarOf } from "../helpers/tar.ts";
import { pushTarImage, pushTarIndex } from "../helpers/tar_image.ts";

const FAST = `
[global.job_queue]
poll_interval_ms = 100
backoff_min_ms = 100
backoff_max_ms = 300
lease_secs = 3
`;

const OS_RELEASE = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n';
const STATUS = "Package: openssl\nStatus: install ok installed\nArchitecture: amd64\n" +
  "Version: 3.0.11-1~deb12u1\n";

const osv = (id: string, ecosystem: string, name: string) =>
  JSON.stringify({
    id,
    modified: "2024-06-01T00:00:00Z",
    affected: [{
      package: { ecosystem, name },
      ranges: [{ type: "ECOSYSTEM", events: [{ introduced: "0" }, { fixed: "9.9.9-1" }] }],
    }],
  });

interface Report {
  advisories: { snapshot: string; records: number } | null;
  vulnerabilities_checked: boolean;
  not_checked?: string;
  refreshing: boolean;
  findings: { id: string }[];
  packages: unknown[];
}

/** A Debian 12 image with one package, under `ns:v1`, and an index of it under `ns:multi`. */
async function pushDebian(s: TestServer, ns: string): Promise<{ digest: string; index: string }> {
  const img = await pushTarImage(s.url, ns, "v1", [
    tarOf([
      { path: "etc/os-release", data: OS_RELEASE },
      { path: "var/lib/dpkg/status", data: STATUS },
    ]),
  ]);
  return { digest: img.digest, index: await pushTarIndex(s.url, ns, "multi", img) };
}

const vuln = (ns: string, digest: string, q = "") => `/v2/${ns}/_svc/vulnerabilities/${digest}${q}`;

/** The report once it is made with the advisory state the server settled on. */
async function settled(
  s: TestServer,
  path: string,
  ready: (r: Report) => boolean = () => true,
): Promise<Report> {
  const deadline = Date.now() + 90_000;
  for (;;) {
    const r = await req(s, path);
    if (r.status === 200) {
      const body = await r.json() as Report;
      if (!body.refreshing && ready(body)) return body;
    } else if (r.status === 202) await r.body?.cancel();
    else assert.fail(`${r.status}: ${await r.text()}`);
    if (Date.now() > deadline) assert.fail(`no settled report\n${s.output().slice(-3000)}`);
    await new Promise((res) => setTimeout(res, 150));
  }
}

/** Every form of the report says "not checked" with `reason`; the index summary has no counts. */
async function assertNotChecked(
  s: TestServer,
  ns: string,
  img: { digest: string; index: string },
  report: Report,
  reason: string,
): Promise<void> {
  assert.equal(report.vulnerabilities_checked, false);
  assert.equal(report.not_checked, reason);
  assert.deepEqual(report.findings, []);
  assert.equal(report.packages.length, 1, "the packages are still listed");
  const csv = await (await req(s, vuln(ns, img.digest, "?format=csv"))).text();
  assert.deepEqual(csv.trimEnd().split("\r\n"), [
    "id,severity,package,installed,fixed,aliases,summary",
    `NOT-CHECKED,UNKNOWN,,,,,vulnerabilities not checked: ${reason}`,
  ]);
  const cdx = await (await req(s, vuln(ns, img.digest, "?format=cyclonedx"))).json();
  assert.equal(cdx.vulnerabilities, undefined, "no empty vulnerabilities array");
  assert.deepEqual(
    cdx.annotations.map((a: { text: string }) => a.text),
    [`vulnerabilities not checked: ${reason}`],
  );
  const spdx = await (await req(s, vuln(ns, img.digest, "?format=spdx"))).json();
  assert.equal(spdx.comment, `vulnerabilities not checked: ${reason}`);
  const idx = await (await req(s, vuln(ns, img.index))).json();
  assert.equal(idx.manifests.length, 1);
  const m = idx.manifests[0];
  assert.equal(m.status, "ready");
  assert.equal(m.vulnerabilities_checked, false);
  assert.equal(m.not_checked, reason);
  assert.equal(m.counts, undefined, "zero counts would read as a clean image");
}

async function withAdvisories(
  files: Record<string, string>,
  fn: (s: TestServer) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-adv-nc-" });
  try {
    for (const [name, text] of Object.entries(files)) {
      await Deno.mkdir(join(dir, name, ".."), { recursive: true });
      await Deno.writeTextFile(join(dir, name), text);
    }
    await withServer({
      config: `${FAST}\n[scan]\nadvisories_dir = ${JSON.stringify(dir)}\n`,
    }, fn);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test({
  ...serverTestOpts,
  name:
    "reports not checked: no advisory data loaded → vulnerabilities_checked false, in every form",
  fn: () =>
    withServer({ config: FAST }, async (s) => {
      const img = await pushDebian(s, "nc/none");
      const report = await settled(s, vuln("nc/none", img.digest));
      assert.equal(report.advisories, null);
      await assertNotChecked(s, "nc/none", img, report, "no advisory data is loaded");
      const st = await runCli(s, "scan", ["--status"]);
      assert.equal(st.code, 0, st.stderr);
      assert.match(st.stdout, /^advisories: none loaded .*reports say "not checked"/m);
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "reports not checked: a snapshot of no records → false; status does not call it loaded",
  fn: () =>
    withAdvisories({ "Debian/garbage.json": "not an advisory" }, async (s) => {
      const img = await pushDebian(s, "nc/empty");
      const report = await settled(s, vuln("nc/empty", img.digest), (r) => r.advisories !== null);
      assert.equal(report.advisories!.records, 0);
      await assertNotChecked(
        s,
        "nc/empty",
        img,
        report,
        "the advisory snapshot holds no records",
      );
      const st = await runCli(s, "scan", ["--status"]);
      assert.equal(st.code, 0, st.stderr);
      assert.match(st.stdout, /^advisories: none loaded: snapshot \S+ of \S+ holds no records/m);
      assert.match(st.stdout, /garbage\.json: not JSON/);
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "reports not checked: a snapshot without the image's ecosystem → false, naming it",
  fn: () =>
    withAdvisories(
      { "Alpine/ALPINE-1.json": osv("ALPINE-1", "Alpine:v3.20", "openssl") },
      async (s) => {
        const img = await pushDebian(s, "nc/other");
        const report = await settled(
          s,
          vuln("nc/other", img.digest),
          (r) => r.advisories !== null,
        );
        assert.equal(report.advisories!.records, 1);
        await assertNotChecked(
          s,
          "nc/other",
          img,
          report,
          "the advisory snapshot holds no records for Debian",
        );
      },
    ),
});

Deno.test({
  ...serverTestOpts,
  name: "reports checked: records for the image's ecosystem → true; no findings reads clean",
  fn: () =>
    withAdvisories(
      // An advisory of a package the image does not have: checked, nothing found.
      { "Debian/DEBIAN-1.json": osv("DEBIAN-1", "Debian:12", "curl") },
      async (s) => {
        const img = await pushDebian(s, "nc/checked");
        const report = await settled(
          s,
          vuln("nc/checked", img.digest),
          (r) => r.advisories !== null,
        );
        assert.equal(report.vulnerabilities_checked, true);
        assert.equal(report.not_checked, undefined);
        assert.deepEqual(report.findings, []);
        const csv = await (await req(s, vuln("nc/checked", img.digest, "?format=csv"))).text();
        assert.equal(csv, "id,severity,package,installed,fixed,aliases,summary\r\n");
        const cdx = await (await req(s, vuln("nc/checked", img.digest, "?format=cyclonedx")))
          .json();
        assert.deepEqual(cdx.vulnerabilities, []);
        assert.equal(cdx.annotations, undefined);
        const spdx = await (await req(s, vuln("nc/checked", img.digest, "?format=spdx"))).json();
        assert.equal(spdx.comment, undefined);
        const idx = await (await req(s, vuln("nc/checked", img.index))).json();
        assert.deepEqual(idx.manifests[0].counts, {
          CRITICAL: 0,
          HIGH: 0,
          MEDIUM: 0,
          LOW: 0,
          UNKNOWN: 0,
        });
        assert.equal(idx.manifests[0].vulnerabilities_checked, undefined);
      },
    ),
});

/** A loopback port nothing listens on: a download there fails at once, as offline. */
function closedPort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

Deno.test({
  ...serverTestOpts,
  name:
    "advisories offline: a failed first download leaves no snapshot; status and the report say none is loaded",
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "wharf-adv-offline-" });
    try {
      await withServer({
        config: `${FAST}
[scan]
advisories_dir = ${JSON.stringify(dir)}
advisories_url = "http://127.0.0.1:${closedPort()}"
refresh_interval_secs = 3600
reload_interval_secs = 1
`,
      }, async (s) => {
        const img = await pushDebian(s, "nc/offline");
        // The scan asks for Debian's dump at once; the download fails and says so beside it.
        const state = join(dir, "Debian", "all.zip.fetch");
        const deadline = Date.now() + 60_000;
        for (;;) {
          const st = await Deno.readTextFile(state).then(JSON.parse).catch(() => null);
          if (st?.error) break;
          if (Date.now() > deadline) assert.fail(`no failed download\n${s.output().slice(-3000)}`);
          await new Promise((res) => setTimeout(res, 200));
        }
        // Several advisory checks later, still nothing loaded.
        await new Promise((res) => setTimeout(res, 2500));
        const report = await settled(s, vuln("nc/offline", img.digest));
        assert.equal(report.advisories, null);
        await assertNotChecked(s, "nc/offline", img, report, "no advisory data is loaded");
        const st = await runCli(s, "advisories", ["status"]);
        assert.equal(st.code, 0, st.stderr);
        assert.match(st.stdout, /^advisories: none loaded \(dir /m);
        assert.match(st.stdout, /^ {2}Debian: no all\.zip yet.*last attempt failed/m);
      });
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
