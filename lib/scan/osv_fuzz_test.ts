// Property and mutation fuzzing of OSV records: advisory archives come from outside.
import assert from "node:assert/strict";
import { affects, cvss3BaseScore, OsvError, parseOsv } from "./osv.ts";
import { compareVersions, type VersionScheme } from "./vercmp.ts";
import {
  expectOnly,
  FAST_MS,
  fc,
  fuzzParams,
  mutatedText,
  withinSync,
} from "../../tests/helpers/fuzz.ts";

const SAMPLE = JSON.stringify({
  id: "DSA-1234-1",
  aliases: ["CVE-2024-0001"],
  modified: "2024-01-01T00:00:00Z",
  summary: "a bug\nmore",
  severity: [{ type: "CVSS_V3", score: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H" }],
  references: [{ url: "https://example.com" }],
  affected: [{
    package: { ecosystem: "Debian:12", name: "openssl" },
    ranges: [{ type: "ECOSYSTEM", events: [{ introduced: "0" }, { fixed: "3.0.11-1" }] }],
    versions: ["3.0.9-1"],
    ecosystem_specific: { severity: "high" },
  }],
});

function check(text: string): void {
  try {
    const out = withinSync(FAST_MS, "parseOsv", () => parseOsv(text));
    assert.ok(out.length <= text.length / 20 + 1);
    for (const a of out) {
      assert.ok(a.summary.length <= 300 && a.references.length <= 5 && a.versions.length <= 500);
      for (const r of a.ranges) for (const e of r) assert.equal(Object.keys(e).length, 1);
    }
  } catch (e) {
    expectOnly(e, OsvError);
  }
}

Deno.test("fuzz osv: record mutations parse or throw OsvError, fast", () => {
  fc.assert(fc.property(mutatedText(SAMPLE, 10), check), fuzzParams());
});

Deno.test("fuzz osv: any JSON value parses or throws OsvError", () => {
  const rec = fc.record({
    id: fc.oneof(fc.string({ maxLength: 300 }), fc.jsonValue({ maxDepth: 2 })),
    affected: fc.array(fc.jsonValue({ maxDepth: 5 }), { maxLength: 5 }),
    severity: fc.jsonValue({ maxDepth: 3 }),
  }, { requiredKeys: [] });
  fc.assert(
    fc.property(fc.oneof(fc.jsonValue({ maxDepth: 6 }), rec), (v) => {
      check(JSON.stringify(v) ?? "null");
    }),
    fuzzParams(),
  );
});

Deno.test("fuzz osv: CVSS scores of any vector are NaN or in [0, 10] with one decimal", () => {
  const part = fc.tuple(
    fc.constantFrom("AV", "AC", "PR", "UI", "S", "C", "I", "A", "X"),
    fc.constantFrom("N", "A", "L", "P", "H", "R", "U", "C", "Z", ""),
  ).map(([k, v]) => `${k}:${v}`);
  fc.assert(
    fc.property(fc.array(part, { maxLength: 10 }), fc.string({ maxLength: 20 }), (parts, junk) => {
      for (const v of [`CVSS:3.1/${parts.join("/")}`, `CVSS:3.0/${junk}/${parts.join("/")}`]) {
        const s = cvss3BaseScore(v);
        if (Number.isNaN(s)) continue;
        assert.ok(s >= 0 && s <= 10, `${v}: ${s}`);
        assert.equal(Math.round(s * 10) / 10, s);
      }
    }),
    fuzzParams(),
  );
});

Deno.test("fuzz osv: affects() never throws for the schemes' comparators", () => {
  const ver = fc.oneof(fc.string({ maxLength: 12 }), fc.stringMatching(/^[0-9][0-9.:~+-]{0,10}$/));
  const event = fc.tuple(fc.constantFrom("introduced", "fixed", "last_affected", "limit"), ver)
    .map(([k, v]) => ({ [k]: v }));
  fc.assert(
    fc.property(
      fc.constantFrom<VersionScheme>("dpkg", "rpm", "apk"),
      fc.array(fc.array(event, { minLength: 1, maxLength: 4 }), { maxLength: 3 }),
      ver,
      (scheme, ranges, version) => {
        const r = affects(
          { ranges, versions: [] },
          version,
          (a, b) => compareVersions(scheme, a, b),
        );
        assert.equal(typeof r.affected, "boolean");
      },
    ),
    fuzzParams(),
  );
});
