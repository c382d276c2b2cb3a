// Property and mutation fuzzing of Python metadata paths and npm lockfiles found in images.
import assert from "node:assert/strict";
import { npmLockfiles, parseNpmLock, pythonPackages } from "./language_pkgs.ts";
import { FAST_MS, fc, fuzzParams, mutatedText, withinSync } from "../../tests/helpers/fuzz.ts";

const LOCK_V3 = JSON.stringify({
  name: "app",
  lockfileVersion: 3,
  packages: {
    "": { name: "app", version: "1.0.0" },
    "node_modules/lodash": { version: "4.17.21" },
    "node_modules/@scope/pkg": { version: "2.0.0" },
    "node_modules/a/node_modules/b": { version: "0.1.0" },
    "node_modules/ws": { link: true },
  },
});
const LOCK_V1 = JSON.stringify({
  lockfileVersion: 1,
  dependencies: { a: { version: "1.0.0", dependencies: { b: { version: "2.0.0" } } } },
});

Deno.test("fuzz language pkgs: npm lockfile mutations parse without throwing, fast", () => {
  fc.assert(
    fc.property(fc.constantFrom(LOCK_V3, LOCK_V1).chain((s) => mutatedText(s, 8)), (text) => {
      const r = withinSync(
        FAST_MS,
        "parseNpmLock",
        () => parseNpmLock(text, "app/package-lock.json"),
      );
      assert.ok(r.packages.length <= text.length / 8 + 1);
      for (const p of r.packages) assert.ok(p.version.length > 0 && p.version.length <= 256);
    }),
    fuzzParams(),
  );
});

Deno.test("fuzz language pkgs: any JSON value is a lockfile or a warning", () => {
  fc.assert(
    fc.property(fc.jsonValue({ maxDepth: 6 }), (v) => {
      const text = JSON.stringify(v) ?? "null";
      const r = parseNpmLock(text, "package-lock.json");
      assert.ok(Array.isArray(r.packages) && Array.isArray(r.warnings));
    }),
    fuzzParams(),
  );
});

Deno.test("fuzz language pkgs: deeply nested v1 dependencies stay bounded", () => {
  let deps: Record<string, unknown> = {};
  for (let i = 0; i < 5000; i++) deps = { [`p${i}`]: { version: "1.0.0", dependencies: deps } };
  const text = JSON.stringify({ lockfileVersion: 1, dependencies: deps });
  const r = withinSync(FAST_MS, "nested", () => parseNpmLock(text, "package-lock.json"));
  assert.ok(r.packages.length <= 5000);
});

Deno.test("fuzz language pkgs: dist-info names parse back from paths", () => {
  const seg = fc.stringMatching(/^[A-Za-z0-9_.]{1,20}$/);
  const ver = fc.stringMatching(/^[0-9][0-9a-z.+!]{0,12}$/);
  fc.assert(
    fc.property(
      fc.array(fc.tuple(seg, ver, fc.constantFrom("site-packages", "dist-packages")), {
        maxLength: 10,
      }),
      fc.array(fc.string({ maxLength: 80 }), { maxLength: 10 }),
      (dists, noise) => {
        const paths = dists.map(([n, v, d]) => `usr/lib/python3/${d}/${n}-${v}.dist-info/METADATA`);
        const r = pythonPackages([...paths, ...noise]);
        for (const [n, v] of dists) {
          assert.ok(r.packages.some((p) => p.name === n && p.version === v), `${n} ${v}`);
        }
        npmLockfiles([...paths, ...noise]);
      },
    ),
    fuzzParams(),
  );
});
