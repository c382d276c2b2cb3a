// Language package inventory: Python metadata directories by path, npm lockfiles v1/v2/v3 (the
// hidden lockfile preferred), scoped and aliased packages, links, and hostile input.
import assert from "node:assert/strict";
import { npmLockfiles, parseNpmLock, pythonPackages } from "./language_pkgs.ts";

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
