// Property and mutation fuzzing of the dpkg and apk database parsers, which read image files.
import assert from "node:assert/strict";
import { inventory, parseApkInstalled, parseDpkgStatus, type ParseResult } from "./package_dbs.ts";
import { FAST_MS, fc, fuzzParams, mutatedText, withinSync } from "../../tests/helpers/fuzz.ts";

const DPKG = [
  "Package: libc6",
  "Status: install ok installed",
  "Architecture: amd64",
  "Source: glibc (2.36-9)",
  "Version: 2.36-9+deb12u4",
  "Description: GNU C Library",
  " continuation line",
  "",
  "Package: removed",
  "Status: deinstall ok config-files",
  "Version: 1",
  "",
].join("\n");

const APK = ["P:musl", "V:1.2.5-r0", "A:x86_64", "o:musl", "R:lib", "Z:Q1abc", "", "P:x", "V:2"]
  .join("\n");

function bounded(text: string, r: ParseResult): void {
  assert.ok(r.packages.length <= text.length / 4 + 1);
  for (const p of r.packages) {
    assert.ok(p.name.length > 0 && p.version.length > 0);
    assert.ok(p.name.length <= 4096 && p.version.length <= 4096);
  }
  assert.ok(r.warnings.length <= 2);
}

Deno.test("fuzz package dbs: dpkg status parses any mutation, fast", () => {
  fc.assert(
    fc.property(mutatedText(DPKG, 10), fc.boolean(), (text, installed) => {
      bounded(text, withinSync(FAST_MS, "dpkg", () => parseDpkgStatus(text, "s", installed)));
    }),
    fuzzParams(),
  );
});

Deno.test("fuzz package dbs: apk installed parses any mutation, fast", () => {
  fc.assert(
    fc.property(mutatedText(APK, 10), (text) => {
      bounded(text, withinSync(FAST_MS, "apk", () => parseApkInstalled(text, "i")));
    }),
    fuzzParams(),
  );
});

Deno.test("fuzz package dbs: records written from random fields parse back", () => {
  const field = fc.stringMatching(/^[A-Za-z0-9.+~:-]{1,40}$/);
  fc.assert(
    fc.property(fc.array(fc.tuple(field, field, field), { maxLength: 20 }), (pkgs) => {
      const dpkg = pkgs.map(([n, v, a]) =>
        `Package: ${n}\nStatus: install ok installed\nVersion: ${v}\nArchitecture: ${a}\n`
      ).join("\n");
      assert.deepEqual(
        parseDpkgStatus(dpkg, "s").packages.map((p) => [p.name, p.version, p.arch]),
        pkgs,
      );
      const apk = pkgs.map(([n, v, a]) => `P:${n}\nV:${v}\nA:${a}\n`).join("\n");
      assert.deepEqual(
        parseApkInstalled(apk, "i").packages.map((p) => [p.name, p.version, p.arch]),
        pkgs,
      );
    }),
    fuzzParams(),
  );
});

Deno.test("fuzz package dbs: inventory of random files never throws", () => {
  const paths = fc.constantFrom(
    "etc/os-release",
    "var/lib/dpkg/status",
    "var/lib/dpkg/status.d/x",
    "lib/apk/db/installed",
    "var/lib/rpm/Packages",
    "var/lib/rpm/Packages.db",
    "etc/redhat-release",
  );
  fc.assert(
    fc.property(
      fc.array(fc.tuple(paths, fc.uint8Array({ maxLength: 600 })), { maxLength: 5 }),
      (files) => {
        const inv = withinSync(FAST_MS, "inventory", () => inventory(new Map(files)));
        assert.ok(Array.isArray(inv.packages) && Array.isArray(inv.warnings));
      },
    ),
    fuzzParams(),
  );
});
