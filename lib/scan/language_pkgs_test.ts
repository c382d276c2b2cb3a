// Language package inventory: Python metadata directories by path, npm lockfiles v1/v2/v3 (the
// hidden lockfile preferred), scoped and aliased packages, links, and hostile input.
import assert from "node:assert/strict";
import {
  MAX_LANGUAGE_PACKAGES,
  MAX_LOCKFILE_BYTES,
  MAX_NAME_CHARS,
  npmLockfiles,
  parseNpmLock,
  pythonPackages,
} from "./language_pkgs.ts";

Deno.test("python: dist-info and egg-info directly under site-packages or dist-packages", () => {
  const r = pythonPackages([
    "usr/lib/python3/dist-packages/requests-2.28.1.dist-info/METADATA",
    "usr/lib/python3/dist-packages/requests-2.28.1.dist-info/RECORD",
    "usr/local/lib/python3.11/site-packages/PyYAML-6.0.1.dist-info",
    "usr/local/lib/python3.11/site-packages/zope.interface-6.1.egg-info/PKG-INFO",
    "usr/local/lib/python3.11/site-packages/typing_extensions-4.9.0.dist-info/WHEEL",
    "opt/app/vendor/fake-1.0.dist-info/METADATA", // not in site-packages
    "usr/lib/python3/dist-packages/nodash.dist-info/METADATA", // no version
    "usr/lib/python3/dist-packages/requests/__init__.py",
  ]);
  assert.deepEqual(
    r.packages.map((p) => `${p.type} ${p.name} ${p.version} ${p.location}`),
    [
      "pypi requests 2.28.1 usr/lib/python3/dist-packages/requests-2.28.1.dist-info",
      "pypi PyYAML 6.0.1 usr/local/lib/python3.11/site-packages/PyYAML-6.0.1.dist-info",
      "pypi zope.interface 6.1 usr/local/lib/python3.11/site-packages/zope.interface-6.1.egg-info",
      "pypi typing_extensions 4.9.0 usr/local/lib/python3.11/site-packages/typing_extensions-4.9.0.dist-info",
    ],
  );
});

Deno.test("npm: the hidden lockfile speaks for its project; plain lockfiles elsewhere", () => {
  assert.deepEqual(
    npmLockfiles([
      "app/package-lock.json",
      "app/node_modules/.package-lock.json",
      "srv/package-lock.json",
      "app/node_modules/dep/package-lock.json", // a dependency's own, not installed as listed
      "node_modules/.package-lock.json",
    ]),
    [
      "app/node_modules/.package-lock.json",
      "node_modules/.package-lock.json",
      "srv/package-lock.json",
    ],
  );
});

Deno.test("npm: lockfile v2/v3 packages (scoped, nested, aliased, links skipped)", () => {
  const lock = JSON.stringify({
    name: "app",
    lockfileVersion: 3,
    packages: {
      "": { name: "app", version: "1.0.0" },
      "node_modules/lodash": { version: "4.17.20" },
      "node_modules/@babel/core": { version: "7.24.0" },
      "node_modules/a/node_modules/lodash": { version: "3.10.1" },
      "node_modules/alias": { name: "minimist", version: "1.2.5" },
      "node_modules/ws": { resolved: "packages/ws", link: true },
      "packages/ws": { name: "ws", version: "0.0.1" },
      "node_modules/bad": "not an object",
      "node_modules/noversion": {},
    },
  });
  const r = parseNpmLock(lock, "app/node_modules/.package-lock.json");
  assert.deepEqual(r.warnings, []);
  assert.deepEqual(
    r.packages.map((p) => `${p.name}@${p.version} ${p.location}`),
    [
      "lodash@4.17.20 app/node_modules/lodash",
      "@babel/core@7.24.0 app/node_modules/@babel/core",
      "lodash@3.10.1 app/node_modules/a/node_modules/lodash",
      "minimist@1.2.5 app/node_modules/alias",
    ],
  );
  assert.ok(r.packages.every((p) => p.type === "npm"));
});

Deno.test("npm: lockfile v1 nested dependencies, walked without recursion", () => {
  let deep: Record<string, unknown> = { leaf: { version: "9.9.9" } };
  for (let i = 0; i < 5000; i++) deep = { [`d${i}`]: { version: "1.0.0", dependencies: deep } };
  const lock = JSON.stringify({
    lockfileVersion: 1,
    dependencies: {
      express: { version: "4.17.1", dependencies: { qs: { version: "6.7.0" } } },
      qs: { version: "6.11.0" },
      ...deep,
    },
  });
  const r = parseNpmLock(lock, "srv/package-lock.json");
  const byLoc = new Map(r.packages.map((p) => [p.location, `${p.name}@${p.version}`]));
  assert.equal(byLoc.get("srv/node_modules/express"), "express@4.17.1");
  assert.equal(byLoc.get("srv/node_modules/express/node_modules/qs"), "qs@6.7.0");
  assert.equal(byLoc.get("srv/node_modules/qs"), "qs@6.11.0");
  // 100 levels are read, the rest named in a warning
  assert.ok(!r.packages.some((p) => p.name === "leaf"));
  assert.equal(r.packages.length, 3 + 100);
  assert.match(r.warnings[0], /nested past 100 levels/);
});

Deno.test("npm: junk lockfiles are warnings, not failures", () => {
  assert.match(parseNpmLock("{ nope", "x/package-lock.json").warnings[0], /not JSON/);
  assert.match(parseNpmLock("[1]", "x/package-lock.json").warnings[0], /no packages/);
  assert.match(parseNpmLock("null", "x/package-lock.json").warnings[0], /not a lockfile/);
  const huge = JSON.stringify({
    packages: { "node_modules/x": { version: "1".repeat(300) }, "node_modules/y": { version: 7 } },
  });
  assert.deepEqual(parseNpmLock(huge, "package-lock.json").packages, []);
});

// Hostile lockfiles and paths (issue 22): sizes, counts and lengths stop at their limits with a
// warning, in time linear in the input.
const GUARD_MS = 3000;

Deno.test("npm: hostile lockfiles are bounded in size, entries, packages and lengths", () => {
  const over = parseNpmLock("x".repeat(1000), "a/package-lock.json", { maxLockfileBytes: 999 });
  assert.deepEqual(over.packages, []);
  assert.match(over.warnings[0], /1000 bytes, over the lockfile limit of 999: not read/);
  assert.equal(
    parseNpmLock(new Uint8Array(MAX_LOCKFILE_BYTES + 1), "a/package-lock.json").warnings.length,
    1,
  );
  const pk: Record<string, unknown> = {};
  for (let i = 0; i < 300_000; i++) pk[`node_modules/p${i}`] = { version: "1.0.0" };
  const text = JSON.stringify({ lockfileVersion: 3, packages: pk });
  const t0 = performance.now();
  const r = parseNpmLock(text, "app/package-lock.json");
  assert.ok(performance.now() - t0 < GUARD_MS);
  assert.equal(r.packages.length, MAX_LANGUAGE_PACKAGES);
  assert.equal(r.truncated, true);
  assert.deepEqual(r.warnings, [
    `app/package-lock.json: more than ${MAX_LANGUAGE_PACKAGES} packages, the rest not listed`,
  ]);
  // entries that are not packages still count against the walk
  const junk: Record<string, unknown> = {};
  for (let i = 0; i < 1000; i++) junk[`x${i}`] = 1;
  const walked = parseNpmLock(JSON.stringify({ packages: junk }), "a/package-lock.json", {
    maxLockfileEntries: 10,
  });
  assert.deepEqual(walked.warnings, [
    "a/package-lock.json: more than 10 entries, the rest not read",
  ]);
  // names and versions past their bound are not listed; v1 the same
  const long = "n".repeat(MAX_NAME_CHARS + 1);
  const lens = parseNpmLock(
    JSON.stringify({
      packages: {
        [`node_modules/${long}`]: { version: "1" },
        "node_modules/ok": { version: "1" },
        "node_modules/v": { version: "1".repeat(300) },
      },
    }),
    "package-lock.json",
  );
  assert.deepEqual(lens.packages.map((p) => p.name), ["ok"]);
  const v1 = parseNpmLock(
    JSON.stringify({ dependencies: { [long]: { version: "1" }, a: { version: "2" } } }),
    "package-lock.json",
    { maxPackages: 5 },
  );
  assert.deepEqual(v1.packages.map((p) => p.name), ["a"]);
});

Deno.test("python: a million paths, huge ones and too many distributions", () => {
  const paths: string[] = [];
  for (let i = 0; i < 1_000_000; i++) paths.push(`usr/share/doc/p${i}/copyright`);
  paths.push(`${"p/".repeat(500_000)}site-packages/x-1.dist-info`);
  paths.push(`usr/lib/site-packages/${"a-".repeat(500_000)}1.dist-info/METADATA`);
  paths.push(`usr/lib/site-packages/${"-packages/".repeat(100_000)}`);
  for (let i = 0; i < 30; i++) {
    paths.push(`usr/lib/python3/site-packages/d${i}-1.0.dist-info/RECORD`);
  }
  const t0 = performance.now();
  const r = pythonPackages(paths, { maxPackages: 20 });
  assert.ok(performance.now() - t0 < GUARD_MS);
  assert.equal(r.packages.length, 20);
  assert.equal(r.packages[0].name, "x");
  assert.deepEqual(r.warnings, ["more than 20 Python distributions, the rest not listed"]);
});
