// Property and mutation fuzzing of os-release and the distro release files.
import assert from "node:assert/strict";
import { advisoryEcosystems, osFromReleaseFiles, parseOsRelease } from "./os_release.ts";
import { FAST_MS, fc, fuzzParams, mutatedText, withinSync } from "../../tests/helpers/fuzz.ts";

const SAMPLE = [
  'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"',
  'NAME="Debian GNU/Linux"',
  'VERSION_ID="12"',
  "VERSION_CODENAME=bookworm",
  "ID=debian",
  "ID_LIKE='rhel fedora'",
  '# comment "x"',
  'HOME_URL="https://www.debian.org/\\"x\\""',
].join("\n");

Deno.test("fuzz os-release: mutations parse without throwing, fast", () => {
  fc.assert(
    fc.property(mutatedText(SAMPLE, 10), (text) => {
      const info = withinSync(FAST_MS, "parseOsRelease", () => parseOsRelease(text));
      if (info === null) return;
      assert.ok(info.id.length > 0 && info.id.length <= text.length);
      assert.ok(Array.isArray(advisoryEcosystems(info)));
    }),
    fuzzParams(),
  );
});

Deno.test("fuzz os-release: quoted values written from random strings read back", () => {
  const value = fc.string({ maxLength: 40 }).filter((s) => !/[\n\r]/.test(s) && s.trim() === s);
  fc.assert(
    fc.property(fc.stringMatching(/^[a-z0-9._-]{1,20}$/), value, (id, pretty) => {
      const quoted = pretty.replace(/[\\"$`]/g, (c) => `\\${c}`);
      const info = parseOsRelease(`ID=${id}\nPRETTY_NAME="${quoted}"\n`);
      assert.equal(info?.id, id);
      assert.equal(info?.pretty_name, pretty);
    }),
    fuzzParams(),
  );
});

Deno.test("fuzz os-release: release files of random text never throw", () => {
  const path = fc.constantFrom(
    "etc/os-release",
    "usr/lib/os-release",
    "etc/debian_version",
    "etc/alpine-release",
    "etc/redhat-release",
    "etc/rocky-release",
  );
  fc.assert(
    fc.property(fc.array(fc.tuple(path, fc.string({ maxLength: 300 })), { maxLength: 4 }), (
      files,
    ) => {
      const info = withinSync(
        FAST_MS,
        "osFromReleaseFiles",
        () => osFromReleaseFiles(new Map(files)),
      );
      if (info) advisoryEcosystems(info);
    }),
    fuzzParams(),
  );
});

Deno.test("fuzz os-release: a megabyte of one line stays fast", () => {
  const text = "ID=" + "a".repeat(1 << 20) + "\n" + 'X=\\"'.repeat(100_000);
  withinSync(FAST_MS, "long os-release", () => parseOsRelease(text));
});
