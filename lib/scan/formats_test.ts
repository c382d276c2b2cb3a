// CycloneDX's `affects`: every package a finding names (by name and installed version), found
// through one lookup table rather than a scan of all packages per finding.
import assert from "node:assert/strict";
import { reportCycloneDx } from "./formats.ts";
import type { ImageReport } from "./scanner.ts";

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
    advisories: null,
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
