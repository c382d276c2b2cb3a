// CycloneDX's `affects`: every package a finding names (by name and installed version), found
// through one lookup table rather than a scan of all packages per finding. A report matched
// against no advisory record reads "not checked" (and why) in CSV, CycloneDX and SPDX; a checked
// report without findings does not.
import assert from "node:assert/strict";
import { notCheckedReason, reportCsv, reportCycloneDx, reportSpdx } from "./formats.ts";
import type { ImageReport } from "./image_report.ts";

Deno.test("cyclonedx: each finding affects exactly the packages of its name and version", () => {
  const pkg = (name: string, version: string, location: string) =>
    ({ type: "npm", name, version, location }) as ImageReport["packages"][number];
  const finding = (id: string, p: string, installed: string) =>
    ({
      id,
      aliases: [],
      severity: "HIGH",
      package: p,
      installed,
      fixed: null,
      summary: "",
      references: [],
      advisory_package: p,
      ecosystem: "npm",
    }) as ImageReport["findings"][number];
  const report = {
    digest: "sha256:" + "0".repeat(64),
    scanned_at: "2026-11-27T00:00:00Z",
    platform: null,
    os: null,
    advisories: { snapshot: "s1", loaded_at: "2026-11-27T00:00:00Z", records: 10 },
    vulnerabilities_checked: true,
    counts: { CRITICAL: 0, HIGH: 2, MEDIUM: 0, LOW: 0, UNKNOWN: 0 },
    packages: [
      pkg("a", "1.0.0", "x/node_modules/a"),
      pkg("a", "1.0.0", "y/node_modules/a"),
      pkg("a", "2.0.0", "z/node_modules/a"),
      ...Array.from({ length: 5000 }, (_, i) => pkg(`p${i}`, "1.0.0", `p${i}`)),
    ],
    findings: [finding("GHSA-1", "a", "1.0.0"), finding("GHSA-2", "missing", "1.0.0")],
    config_secrets: [],
    warnings: [],
  } as ImageReport;
  const bom = reportCycloneDx(report) as {
    vulnerabilities: { id: string; affects: { ref: string }[] }[];
  };
  assert.deepEqual(bom.vulnerabilities.map((v) => [v.id, v.affects.length]), [
    ["GHSA-1", 2],
    ["GHSA-2", 0],
  ]);
  assert.ok(bom.vulnerabilities[0].affects.every((r) => r.ref.includes("a@1.0.0")));
});

const ZERO = { CRITICAL: 0, HIGH: 0, MEDIUM: 0, LOW: 0, UNKNOWN: 0 };

/** A Debian image of two packages and no findings, checked or not. */
function emptyReport(check: Partial<ImageReport>): ImageReport {
  return {
    digest: "sha256:" + "1".repeat(64),
    scanned_at: "2026-11-28T10:00:00.123Z",
    platform: { os: "linux", architecture: "amd64" },
    os: { id: "debian", version_id: "12" },
    advisories: { snapshot: "s1", loaded_at: "2026-11-28T09:00:00.000Z", records: 10 },
    vulnerabilities_checked: true,
    counts: ZERO,
    packages: [
      { type: "deb", name: "openssl", version: "3.0.11-1", location: "var/lib/dpkg/status" },
      { type: "deb", name: "zlib1g", version: "1:1.2.13", location: "var/lib/dpkg/status" },
    ],
    findings: [],
    config_secrets: [],
    warnings: [],
    ...check,
  } as ImageReport;
}

const csvRows = (csv: string) => csv.trimEnd().split("\r\n");

Deno.test("formats: a report not checked says so, and why, in CSV, CycloneDX and SPDX", () => {
  const reason = "the advisory snapshot holds no records for Debian:12";
  const r = emptyReport({ vulnerabilities_checked: false, not_checked: reason });
  // CSV: a row no reader takes for an empty (clean) list.
  const rows = csvRows(reportCsv(r));
  assert.equal(rows[0], "id,severity,package,installed,fixed,aliases,summary");
  assert.deepEqual(rows.slice(1), [
    `NOT-CHECKED,UNKNOWN,,,,,vulnerabilities not checked: ${reason}`,
  ]);
  // CycloneDX: no `vulnerabilities` array at all (an empty one is a clean result), the reason as
  // a property of the BOM's metadata and an annotation of the image.
  const bom = reportCycloneDx(r) as {
    vulnerabilities?: unknown[];
    metadata: { properties: { name: string; value: string }[] };
    annotations: { subjects: string[]; text: string; annotator: unknown }[];
  };
  assert.equal("vulnerabilities" in bom, false);
  const props = Object.fromEntries(bom.metadata.properties.map((p) => [p.name, p.value]));
  assert.equal(props["wharf:vulnerabilities:checked"], "false");
  assert.equal(props["wharf:vulnerabilities:not_checked"], reason);
  assert.deepEqual(bom.annotations.map((a) => [a.subjects, a.text]), [
    [[r.digest], `vulnerabilities not checked: ${reason}`],
  ]);
  assert.deepEqual(bom.annotations[0].annotator, {
    component: { type: "application", name: "wharf" },
  });
  // SPDX: the document's comment and an annotation of the image package.
  const spdx = reportSpdx(r, "https://x/v2/a/sbom") as {
    comment: string;
    packages: { SPDXID: string; annotations?: { comment: string; annotationType: string }[] }[];
  };
  assert.equal(spdx.comment, `vulnerabilities not checked: ${reason}`);
  const image = spdx.packages.find((p) => p.SPDXID === "SPDXRef-Image")!;
  assert.deepEqual(image.annotations!.map((a) => [a.annotationType, a.comment]), [
    ["OTHER", `vulnerabilities not checked: ${reason}`],
  ]);
});

Deno.test("formats: a checked report without findings reads clean, never 'not checked'", () => {
  const r = emptyReport({});
  assert.deepEqual(csvRows(reportCsv(r)), ["id,severity,package,installed,fixed,aliases,summary"]);
  const bom = reportCycloneDx(r) as {
    vulnerabilities: unknown[];
    metadata: { properties: { name: string; value: string }[] };
  };
  assert.deepEqual(bom.vulnerabilities, []);
  assert.deepEqual(
    bom.metadata.properties.find((p) => p.name === "wharf:vulnerabilities:checked")?.value,
    "true",
  );
  const spdx = reportSpdx(r, "https://x/v2/a/sbom");
  for (const text of [JSON.stringify(bom), JSON.stringify(spdx)]) {
    assert.ok(!/not.checked/i.test(text), text.slice(0, 400));
  }
  assert.equal("comment" in spdx, false);
});

Deno.test("formats: a report written before vulnerabilities_checked is checked only with records", () => {
  const old = (advisories: ImageReport["advisories"]) => {
    const r = emptyReport({ advisories }) as Partial<ImageReport>;
    delete r.vulnerabilities_checked;
    return r as ImageReport;
  };
  assert.equal(notCheckedReason(old(null)), "no advisory data is loaded");
  assert.equal(
    notCheckedReason(old({ snapshot: "s", loaded_at: "2026-11-28T09:00:00Z", records: 0 })),
    "the advisory snapshot holds no records",
  );
  assert.equal(
    notCheckedReason(old({ snapshot: "s", loaded_at: "2026-11-28T09:00:00Z", records: 3 })),
    null,
  );
  assert.match(csvRows(reportCsv(old(null)))[1], /^NOT-CHECKED,.*no advisory data is loaded$/);
});
