import assert from "node:assert/strict";
import { affects, cvss3BaseScore, OsvError, parseOsv, severityOf } from "./osv.ts";

// Plain numeric order stands in for a distro's (each distro's own is tested in versions/).
const num = (a: string, b: string) => {
  const x = a.split(".").map(Number), y = b.split(".").map(Number);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d) return Math.sign(d);
  }
  return 0;
};

Deno.test("CVSS 3.x base scores match the specification's examples", () => {
  // Scores as NVD publishes them for these vectors.
  assert.equal(cvss3BaseScore("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"), 9.8);
  assert.equal(cvss3BaseScore("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:C/C:H/I:H/A:H"), 10);
  assert.equal(cvss3BaseScore("CVSS:3.1/AV:N/AC:L/PR:N/UI:R/S:C/C:L/I:L/A:N"), 6.1);
  assert.equal(cvss3BaseScore("CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:U/C:H/I:N/A:N"), 5.5);
  assert.equal(cvss3BaseScore("CVSS:3.0/AV:N/AC:H/PR:N/UI:N/S:U/C:L/I:N/A:N"), 3.7);
  assert.equal(cvss3BaseScore("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:N"), 0);
  assert.ok(Number.isNaN(cvss3BaseScore("CVSS:3.1/AV:X/AC:L")));
  assert.ok(Number.isNaN(cvss3BaseScore("garbage")));
});

Deno.test("severity: a distro rating wins over a CVSS vector; none is UNKNOWN", () => {
  const vec = {
    severity: [{ type: "CVSS_V3", score: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H" }],
  };
  assert.equal(severityOf(vec), "CRITICAL");
  assert.equal(severityOf({ ...vec, database_specific: { severity: "low" } }), "LOW");
  assert.equal(severityOf({}, { ecosystem_specific: { severity: "Moderate" } }), "MEDIUM");
  assert.equal(severityOf({}), "UNKNOWN");
  assert.equal(severityOf({ severity: [{ score: "nonsense" }] }), "UNKNOWN");
});

Deno.test("parseOsv: one entry per affected package, ECOSYSTEM ranges only, bounded fields", () => {
  const rec = {
    id: "DEBIAN-CVE-2024-0001",
    aliases: ["CVE-2024-0001"],
    modified: "2024-01-02T00:00:00Z",
    summary: "first line\nsecond line",
    references: Array.from({ length: 9 }, (_, i) => ({ url: `https://x/${i}` })),
    affected: [
      {
        package: { ecosystem: "Debian:12", name: "openssl" },
        ranges: [
          { type: "ECOSYSTEM", events: [{ introduced: "0" }, { fixed: "3.0.11-1~deb12u2" }] },
          { type: "GIT", events: [{ introduced: "abc" }] },
        ],
      },
      { package: { ecosystem: "Debian:11", name: "openssl" }, versions: ["1.1.1n-0+deb11u5"] },
      { package: { ecosystem: "Debian:10" } },
      {
        package: { ecosystem: "Debian:13", name: "openssl" },
        ranges: [{ type: "SEMVER", events: [] }],
      },
    ],
  };
  const out = parseOsv(JSON.stringify(rec));
  assert.equal(out.length, 2);
  assert.equal(out[0].ecosystem, "Debian:12");
  assert.deepEqual(out[0].ranges, [[{ introduced: "0" }, { fixed: "3.0.11-1~deb12u2" }]]);
  assert.equal(out[0].summary, "first line");
  assert.equal(out[0].references.length, 5);
  assert.deepEqual(out[1].versions, ["1.1.1n-0+deb11u5"]);
  assert.deepEqual(parseOsv(JSON.stringify({ ...rec, withdrawn: "2024-02-01T00:00:00Z" })), []);
  assert.throws(() => parseOsv("{"), OsvError);
  assert.throws(() => parseOsv("[]"), OsvError);
  assert.throws(() => parseOsv(JSON.stringify({ affected: [] })), OsvError);
  assert.throws(() => parseOsv(JSON.stringify({ id: "x".repeat(10_000) })), OsvError);
});

Deno.test("affects: introduced/fixed/last_affected/limit windows and the fix offered", () => {
  const r = (events: object[], versions: string[] = []) => ({ ranges: [events], versions });
  const w = r([{ introduced: "1.2" }, { fixed: "1.5" }, { introduced: "2.0" }, { fixed: "2.3" }]);
  assert.deepEqual(affects(w, "1.1", num), { affected: false, fixed: null });
  assert.deepEqual(affects(w, "1.2", num), { affected: true, fixed: "1.5" });
  assert.deepEqual(affects(w, "1.4.9", num), { affected: true, fixed: "1.5" });
  assert.deepEqual(affects(w, "1.5", num), { affected: false, fixed: null });
  assert.deepEqual(affects(w, "2.1", num), { affected: true, fixed: "2.3" });
  assert.deepEqual(affects(w, "2.3", num), { affected: false, fixed: null });
  const last = r([{ introduced: "0" }, { last_affected: "3.1" }]);
  assert.equal(affects(last, "3.1", num).affected, true);
  assert.equal(affects(last, "3.1.1", num).affected, false);
  assert.equal(affects(last, "0.0.1", num).fixed, null, "no fix published");
  const unordered = r([{ fixed: "5" }, { introduced: "0" }]);
  assert.equal(affects(unordered, "4", num).affected, true, "events are sorted before the walk");
  assert.equal(affects(r([{ introduced: "0" }, { limit: "2" }]), "2", num).affected, false);
  assert.equal(affects({ ranges: [], versions: ["1.0"] }, "1.0", num).affected, true);
});
