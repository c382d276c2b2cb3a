import assert from "node:assert/strict";
import { join } from "node:path";
import { missingReason, runs } from "../../tests/e2e/_tools.ts";
import {
  inventory,
  MAX_PACKAGES,
  parseApkInstalled,
  parseDpkgStatus,
  STATUS_D_PREFIX,
} from "./package_dbs.ts";
import {
  parseRpmBdb,
  parseRpmHeaderBlob,
  parseRpmSqlite,
  RpmHeaderError,
  sourceName,
} from "./rpmdb.ts";
import {
  advisoryEcosystems,
  MAX_OS_FIELD_CHARS,
  osFromReleaseFiles,
  parseOsRelease,
} from "./os_release.ts";

const enc = new TextEncoder();
const dpkgMissing = missingReason(
  "dpkg database",
  runs("dpkg-query", ["--version"]) ? [] : ["dpkg-query"],
  "Debian's dpkg",
);
const rpmMissing = missingReason(
  "rpm database",
  runs("rpmbuild", ["--version"]) ? [] : ["rpmbuild"],
  "apt-get install rpm",
);

async function sh(cmd: string, args: string[]): Promise<string> {
  const o = await new Deno.Command(cmd, { args }).output();
  assert.equal(o.code, 0, `${cmd} ${args.join(" ")}: ${new TextDecoder().decode(o.stderr)}`);
  return new TextDecoder().decode(o.stdout);
}

Deno.test({
  name: "dpkg: this machine's real status file, counted and versioned as dpkg-query says",
  ignore: dpkgMissing !== null,
  fn: async () => {
    const text = await Deno.readTextFile("/var/lib/dpkg/status");
    const r = parseDpkgStatus(text, "var/lib/dpkg/status");
    const installed = (await sh("dpkg-query", ["-W", "-f", "${Status}\\n"]))
      .split("\n").filter((l) => l === "install ok installed").length;
    assert.equal(r.packages.length, installed);
    const libc = r.packages.find((p) => p.name === "libc6")!;
    assert.equal(libc.version, await sh("dpkg-query", ["-W", "-f", "${Version}", "libc6"]));
    assert.equal(libc.source_name, "glibc");
    assert.deepEqual(r.warnings, []);
  },
});

Deno.test("dpkg: Source with a version, continuation lines, removed packages, garbage", () => {
  const text = [
    "Package: bash\nStatus: install ok installed\nSource: bash (5.2.15-2)\nVersion: 5.2.15-2+b2\n" +
    "Architecture: amd64\nDescription: GNU Bourne Again SHell\n Bash is an sh-compatible shell\n .\n",
    "Package: gone\r\nStatus: deinstall ok config-files\r\nVersion: 1.0\r\n",
    "Package: half-broken\nStatus: install ok installed\n",
    "this line has no colon\n: neither a key\nPackage: zlib1g\nStatus: install ok installed\n" +
    "Source: zlib\nVersion: 1:1.2.13.dfsg-1\n",
  ].join("\n");
  const r = parseDpkgStatus(text, "var/lib/dpkg/status");
  assert.deepEqual(r.packages.map((p) => [p.name, p.version, p.source_name, p.source_version]), [
    ["bash", "5.2.15-2+b2", "bash", "5.2.15-2"],
    ["zlib1g", "1:1.2.13.dfsg-1", "zlib", "1:1.2.13.dfsg-1"],
  ]);
  assert.match(r.warnings[0], /1 entries without a Package or Version/);
  // distroless status.d files carry no Status field
  const inv = inventory(
    new Map([
      ["var/lib/dpkg/status.d/base", enc.encode("Package: base-files\nVersion: 12.4+deb12u5\n")],
      ["var/lib/dpkg/status.d/tzdata", enc.encode("Package: tzdata\nVersion: 2024a-0+deb12u1\n")],
      ["etc/debian_version", enc.encode("12.5\n")],
    ]),
  );
  assert.deepEqual(inv.packages.map((p) => p.name), ["base-files", "tzdata"]);
  assert.equal(inv.os?.id, "debian");
  assert.deepEqual(advisoryEcosystems(inv.os!), ["Debian:12", "Debian"]);
});

Deno.test("apk: an Alpine 3.20 installed database", () => {
  const text = [
    "C:Q1abc=\nP:musl\nV:1.2.5-r0\nA:x86_64\nS:407000\nI:647168\no:musl\nm:Natanael Copa\n" +
    "F:lib\nR:ld-musl-x86_64.so.1\nZ:Q1xyz=\n",
    "P:libcrypto3\nV:3.3.2-r0\nA:x86_64\no:openssl\n",
    "P:busybox\nV:1.36.1-r29\nA:x86_64\no:busybox\n",
    "V:9.9\n",
  ].join("\n");
  const r = parseApkInstalled(text, "lib/apk/db/installed");
  assert.deepEqual(r.packages.map((p) => [p.name, p.version, p.source_name, p.arch]), [
    ["musl", "1.2.5-r0", "musl", "x86_64"],
    ["libcrypto3", "3.3.2-r0", "openssl", "x86_64"],
    ["busybox", "1.36.1-r29", "busybox", "x86_64"],
  ]);
  assert.match(r.warnings[0], /1 records without P: or V:/);
  const os = osFromReleaseFiles(new Map([["etc/alpine-release", "3.20.3\n"]]))!;
  assert.deepEqual(advisoryEcosystems(os), ["Alpine:v3.20", "Alpine"]);
});

Deno.test("os-release: quoting, ids and the OSV ecosystems of common distros", () => {
  const ub = parseOsRelease(
    'NAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\nID_LIKE=debian\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\n',
  )!;
  assert.equal(ub.pretty_name, "Ubuntu 22.04.4 LTS");
  assert.deepEqual(ub.id_like, ["debian"]);
  assert.deepEqual(advisoryEcosystems(ub), ["Ubuntu:22.04:LTS", "Ubuntu:22.04", "Ubuntu"]);
  const rocky = parseOsRelease(
    `ID="rocky"\nVERSION_ID='9.3'\nPRETTY_NAME="Rocky \\"Blue\\" Onyx"\n`,
  )!;
  assert.equal(rocky.id, "rocky");
  assert.equal(rocky.version_id, "9.3");
  assert.equal(rocky.pretty_name, 'Rocky "Blue" Onyx');
  assert.deepEqual(advisoryEcosystems(rocky), ["Rocky Linux:9", "Rocky Linux"]);
  assert.equal(parseOsRelease("# nothing\nFOO=bar\n"), null);
  assert.equal(parseOsRelease("\0\0garbage"), null);
  const rh = osFromReleaseFiles(
    new Map([["etc/redhat-release", "Red Hat Enterprise Linux release 8.9 (Ootpa)\n"]]),
  )!;
  assert.deepEqual([rh.id, rh.version_id], ["rhel", "8.9"]);
  assert.deepEqual(advisoryEcosystems(rh), ["Red Hat"]);
  const mine = parseOsRelease(Deno.readTextFileSync("/etc/os-release"));
  assert.ok(mine && mine.id.length > 0, "this machine's os-release parses");
});

Deno.test("rpm: corrupt headers are errors, never a throw past the parser", () => {
  assert.throws(() => parseRpmHeaderBlob(new Uint8Array(3)), RpmHeaderError);
  const huge = new Uint8Array(8);
  new DataView(huge.buffer).setUint32(0, 0xffffffff);
  assert.throws(() => parseRpmHeaderBlob(huge), RpmHeaderError);
  // one index entry pointing past the data store
  const b = new Uint8Array(8 + 16 + 4);
  const v = new DataView(b.buffer);
  v.setUint32(0, 1);
  v.setUint32(4, 4);
  v.setUint32(8, 1000);
  v.setUint32(12, 6);
  v.setUint32(16, 2);
  v.setUint32(20, 1);
  b.set([0x41, 0x42, 0x43, 0x44], 24); // "ABCD" without a NUL
  assert.throws(() => parseRpmHeaderBlob(b), RpmHeaderError);
  assert.equal(sourceName("openssl-3.0.7-27.el9.src.rpm"), "openssl");
  assert.equal(sourceName("python3.11-pip-22.3.1-4.el9.src.rpm"), "python3.11-pip");
  assert.equal(sourceName("nonsense"), null);
  const r = parseRpmSqlite(enc.encode("not sqlite at all"), "var/lib/rpm/rpmdb.sqlite");
  assert.deepEqual(r.packages, []);
  assert.match(r.warnings[0], /not a readable rpm sqlite database/);
});

Deno.test({
  name: "rpm: a real rpmdb.sqlite made by rpm with an rpmbuild-built package",
  ignore: rpmMissing !== null,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "wharf-rpm-" });
    try {
      const db = await rpmDb(dir, [
        { name: "wharf-demo", version: "1.2~rc1", release: "3.el9", epoch: 2 },
      ]);
      const bytes = await Deno.readFile(join(db, "rpmdb.sqlite"));
      const r = parseRpmSqlite(bytes, "var/lib/rpm/rpmdb.sqlite");
      assert.deepEqual(r.warnings, []);
      assert.deepEqual(r.packages, [{
        name: "wharf-demo",
        version: "2:1.2~rc1-3.el9",
        type: "rpm",
        location: "var/lib/rpm/rpmdb.sqlite",
        arch: "noarch",
        source_name: "wharf-demo",
        source_version: "2:1.2~rc1-3.el9",
      }]);
      // the same through inventory(), found under Fedora's path
      const inv = inventory(new Map([["usr/lib/sysimage/rpm/rpmdb.sqlite", bytes]]));
      assert.equal(inv.packages.length, 1);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

const bdbMissing = missingReason(
  "rpm BerkeleyDB",
  runs("rpmbuild", ["--version"]) && runs("db5.3_load", ["-V"]) ? [] : ["rpmbuild", "db5.3_load"],
  "apt-get install rpm db5.3-util",
);

interface RpmSpec {
  name: string;
  version: string;
  release: string;
  epoch?: number;
}

/** An rpm database (rpm --initdb) holding `specs`, each built by rpmbuild and installed --justdb. */
async function rpmDb(dir: string, specs: RpmSpec[]): Promise<string> {
  const top = join(dir, "build");
  await Deno.mkdir(join(top, "SPECS"), { recursive: true });
  const db = join(dir, "db");
  await sh("rpm", ["--initdb", "--dbpath", db]);
  for (const p of specs) {
    const spec = join(top, "SPECS", `${p.name}.spec`);
    await Deno.writeTextFile(
      spec,
      `Name: ${p.name}\nVersion: ${p.version}\nRelease: ${p.release}\n` +
        (p.epoch !== undefined ? `Epoch: ${p.epoch}\n` : "") +
        `Summary: demo\nLicense: MIT\nBuildArch: noarch\n\n%description\ndemo\n\n%install\n` +
        `mkdir -p %{buildroot}/opt\necho ${p.name} > %{buildroot}/opt/${p.name}.txt\n\n` +
        `%files\n/opt/${p.name}.txt\n`,
    );
    await sh("rpmbuild", [
      "--define",
      `_topdir ${top}`,
      "--define",
      "_build_id_links none",
      "-bb",
      spec,
    ]);
    await sh("rpm", [
      "-i",
      "--nodeps",
      "--noscripts",
      "--justdb",
      "--ignorearch",
      "--ignoreos",
      "--dbpath",
      db,
      join(top, "RPMS", "noarch", `${p.name}-${p.version}-${p.release}.noarch.rpm`),
    ]);
  }
  return db;
}

/** Header blobs of `specs`, as rpm stored them. */
async function rpmHeaders(dir: string, specs: RpmSpec[]): Promise<Uint8Array[]> {
  const db = await rpmDb(dir, specs);
  const { DatabaseSync } = await import("node:sqlite");
  const sq = new DatabaseSync(join(db, "rpmdb.sqlite"), { readOnly: true });
  try {
    return (sq.prepare("SELECT blob FROM Packages ORDER BY hnum").all() as { blob: Uint8Array }[])
      .map((r) => r.blob);
  } finally {
    sq.close();
  }
}

/** A BerkeleyDB hash file written by Berkeley DB itself (db5.3_load) from key/value pairs. */
async function bdbFile(dir: string, pageSize: number, pairs: [Uint8Array, Uint8Array][]) {
  const hex = (b: Uint8Array) =>
    " " + Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  const dump = [
    "VERSION=3",
    "format=bytevalue",
    "type=hash",
    `db_pagesize=${pageSize}`,
    "HEADER=END",
    ...pairs.flatMap(([k, v]) => [hex(k), hex(v)]),
    "DATA=END",
    "",
  ].join("\n");
  const file = join(dir, `Packages-${pageSize}`);
  const p = new Deno.Command("db5.3_load", { args: [file], stdin: "piped", stderr: "piped" })
    .spawn();
  const w = p.stdin.getWriter();
  await w.write(new TextEncoder().encode(dump));
  await w.close();
  const o = await p.output();
  assert.equal(o.code, 0, new TextDecoder().decode(o.stderr));
  return await Deno.readFile(file);
}

Deno.test({
  name: "rpm: a BerkeleyDB Packages written by Berkeley DB, inline and overflow values",
  ignore: bdbMissing !== null,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "wharf-rpm-bdb-" });
    try {
      const headers = await rpmHeaders(dir, [
        { name: "wharf-base", version: "1.0", release: "1.el7", epoch: 1 },
        { name: "wharf-lib", version: "1.1", release: "2.el7" },
        { name: "wharf-tool", version: "1.2", release: "3.el7" },
      ]);
      assert.equal(headers.length, 3);
      // As rpm lays it out: key 0 holds a counter, keys 1..n (native-endian) the headers; 60
      // copies so the values spread over many buckets and pages.
      const key = (n: number) => new Uint8Array(new Uint32Array([n]).buffer);
      const pairs: [Uint8Array, Uint8Array][] = [[key(0), key(181)]];
      for (let i = 1; i <= 180; i++) pairs.push([key(i), headers[i % 3]]);
      // 512-byte pages: every header on an overflow chain; 64 KiB pages: inline items
      for (const pageSize of [512, 65536]) {
        const bytes = await bdbFile(dir, pageSize, pairs);
        const r = parseRpmBdb(bytes, "var/lib/rpm/Packages");
        assert.deepEqual(r.warnings, [], `page size ${pageSize}`);
        const count = new Map<string, number>();
        for (const p of r.packages) {
          count.set(`${p.name} ${p.version}`, (count.get(`${p.name} ${p.version}`) ?? 0) + 1);
        }
        assert.deepEqual(
          Object.fromEntries(count),
          { "wharf-base 1:1.0-1.el7": 60, "wharf-lib 1.1-2.el7": 60, "wharf-tool 1.2-3.el7": 60 },
          `page size ${pageSize}`,
        );
        const inv = inventory(new Map([["var/lib/rpm/Packages", bytes]]));
        assert.equal(inv.packages.length, 180);
        assert.deepEqual(inv.warnings, []);
        // truncated: what is readable, and a warning instead of a throw
        const cut = parseRpmBdb(
          bytes.slice(0, Math.floor(bytes.length / 2)),
          "var/lib/rpm/Packages",
        );
        assert.ok(cut.packages.length < 180);
      }
      for (const junk of [new Uint8Array(4096), enc.encode("x".repeat(600))]) {
        const r = parseRpmBdb(junk, "var/lib/rpm/Packages");
        assert.deepEqual(r.packages, []);
        assert.match(r.warnings[0], /not a readable rpm BerkeleyDB database/);
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

// Hostile databases (issue 22): each input is built here, the large ones at test time. Every
// case must end in bounded results, warnings instead of throws, and well under the time guard
// (a super-linear regression shows up as seconds to minutes).
const GUARD_MS = 3000;

function timed<T>(what: string, f: () => T): T {
  const t0 = performance.now();
  const r = f();
  const ms = performance.now() - t0;
  assert.ok(ms < GUARD_MS, `${what}: ${ms.toFixed(0)} ms`);
  return r;
}

Deno.test("hostile dpkg: 255 MiB of newlines, a 64 MiB line, blank lines of spaces", () => {
  const nl = new Uint8Array(255 << 20).fill(0x0a);
  const inv = timed("newlines", () => inventory(new Map([["var/lib/dpkg/status", nl]])));
  assert.deepEqual(inv.packages, []);
  assert.deepEqual(inv.warnings, []);
  // a kept field longer than any real one: that entry is skipped, the next one is read
  const long = new Uint8Array((64 << 20) + 200);
  long.set(enc.encode("Package: "), 0);
  long.fill(0x61, 9, 64 << 20);
  long.set(
    enc.encode("\nVersion: 1\n\nPackage: ok\nVersion: 2\nStatus: install ok installed\n"),
    64 << 20,
  );
  const r = timed("long line", () => parseDpkgStatus(long, "s", false));
  assert.deepEqual(r.packages.map((p) => p.name), ["ok"]);
  assert.match(r.warnings.join("\n"), /1 entries with a field over 4096 bytes skipped/);
  // a 16 MiB line of a field not kept is passed over without being decoded
  const desc = enc.encode(
    "Package: a\nVersion: 1\nDescription: " + "d".repeat(16 << 20) + "\n" + " more\n".repeat(1e5),
  );
  assert.equal(timed("description", () => parseDpkgStatus(desc, "s", false)).packages.length, 1);
  const spaces = enc.encode(" \t\n".repeat(20 << 20));
  assert.deepEqual(timed("spaces", () => parseDpkgStatus(spaces, "s")).packages, []);
  const colons = enc.encode("a:\n".repeat(20 << 20));
  assert.deepEqual(timed("colons", () => parseDpkgStatus(colons, "s", false)).warnings, [
    "s: 1 entries without a Package or Version",
  ]);
});

function dpkgStatus(n: number, prefix = "pkg"): Uint8Array {
  const parts: string[] = [];
  for (let i = 0; i < n; i++) {
    parts.push(
      `Package: ${prefix}${i}\nStatus: install ok installed\nPriority: optional\n` +
        `Installed-Size: 100\nMaintainer: Someone <a@b.c>\nArchitecture: amd64\n` +
        `Source: src${i}\nVersion: 1.${i}-1\nDescription: package ${i}\n a longer line\n .\n\n`,
    );
  }
  return enc.encode(parts.join(""));
}

Deno.test("hostile dpkg/apk: 200,000 packages, the limit held over every database", () => {
  const big = dpkgStatus(200_000);
  const inv = timed("200k", () => inventory(new Map([["var/lib/dpkg/status", big]])));
  assert.equal(inv.packages.length, MAX_PACKAGES);
  assert.deepEqual(inv.warnings, [
    `var/lib/dpkg/status: more than ${MAX_PACKAGES} packages, the rest not listed`,
  ]);
  // the limit spans status, status.d and apk together, with one warning naming it
  const files = new Map<string, Uint8Array>([["var/lib/dpkg/status", dpkgStatus(30)]]);
  for (let i = 0; i < 50; i++) files.set(`${STATUS_D_PREFIX}f${i}`, dpkgStatus(1, `d${i}-`));
  files.set("lib/apk/db/installed", enc.encode("P:musl\nV:1\n\n".repeat(10)));
  const small = inventory(files, { maxPackages: 40 });
  assert.equal(small.packages.length, 40);
  assert.deepEqual(small.warnings, [
    "41 package database(s) not read: over the limit of 40 packages",
  ]);
  files.set(`${STATUS_D_PREFIX}f0`, dpkgStatus(20, "many-"));
  const cut = inventory(files, { maxPackages: 40 });
  assert.equal(cut.packages.length, 40);
  assert.deepEqual(cut.warnings, [
    `${STATUS_D_PREFIX}f0: more than 40 packages in the image, the rest not listed`,
    "50 package database(s) not read: over the limit of 40 packages",
  ]);
  // garbage apk: newlines, one huge P: line, no separators at all
  const nl = new Uint8Array(200 << 20).fill(0x0a);
  assert.deepEqual(timed("apk newlines", () => parseApkInstalled(nl, "i")).packages, []);
  const line = enc.encode("P:" + "x".repeat(32 << 20) + "\nV:1\n\nP:ok\nV:2\n");
  const r = timed("apk line", () => parseApkInstalled(line, "i"));
  assert.deepEqual(r.packages.map((p) => p.name), ["ok"]);
  assert.match(r.warnings[0], /1 records with a field over 4096 bytes skipped/);
  const oneRecord = enc.encode("P:a\nV:1\nR:x\nZ:y\n".repeat(4 << 20));
  assert.equal(timed("apk one record", () => parseApkInstalled(oneRecord, "i")).packages.length, 1);
  // field bounds are options too
  assert.equal(
    parseApkInstalled(enc.encode("P:abcdef\nV:1\n"), "i", { maxFieldBytes: 4 })
      .packages.length,
    0,
  );
});

Deno.test("hostile os-release: a 50 MiB one-line value is cut to a short field", () => {
  const text = "ID=debian\nVERSION_ID=" + "9".repeat(50 << 20) + "\nPRETTY_NAME=x\n";
  const inv = timed("os-release", () => inventory(new Map([["etc/os-release", enc.encode(text)]])));
  assert.equal(inv.os?.id, "debian");
  assert.equal(inv.os?.version_id, "9".repeat(MAX_OS_FIELD_CHARS));
  // what the scan record stores (`id version_id`) stays far below KV's 64 KiB
  assert.ok(JSON.stringify(inv.os).length < 1024);
  assert.match(inv.warnings[0], /etc\/os-release: \d+ bytes, the first 65536 read/);
  const one = parseOsRelease(`ID=${"a".repeat(100_000)}`, { maxOsFieldChars: 10 })!;
  assert.equal(one.id, "a".repeat(10));
  const rh = osFromReleaseFiles(new Map([["etc/redhat-release", `release ${"1.".repeat(1e6)}1`]]))!;
  assert.ok(rh.version_id!.length <= MAX_OS_FIELD_CHARS);
  assert.ok(rh.pretty_name!.length <= MAX_OS_FIELD_CHARS);
});

/** An rpm header blob with NAME/VERSION/RELEASE strings and `pad` more data bytes. */
function rpmHeaderBlob(name: string, version: string, release: string, pad = 0): Uint8Array {
  const data: number[] = [];
  const idx: number[][] = [];
  for (const [tag, s] of [[1000, name], [1001, version], [1002, release]] as const) {
    idx.push([tag, 6, data.length, 1]);
    data.push(...enc.encode(s), 0);
  }
  const dl = data.length + pad;
  const b = new Uint8Array(8 + idx.length * 16 + dl);
  const v = new DataView(b.buffer);
  v.setUint32(0, idx.length);
  v.setUint32(4, dl);
  idx.forEach((e, i) => e.forEach((x, j) => v.setUint32(8 + i * 16 + j * 4, x)));
  b.set(data, 8 + idx.length * 16);
  return b;
}

/** An sqlite database made by `sql`, as bytes. */
async function sqliteBytes(sql: string): Promise<Uint8Array> {
  const { DatabaseSync } = await import("node:sqlite");
  const dir = await Deno.makeTempDir({ prefix: "wharf-sqlite-" });
  try {
    const db = new DatabaseSync(join(dir, "db"));
    db.exec(sql);
    db.close();
    return await Deno.readFile(join(dir, "db"));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("hostile rpm sqlite: views, computed columns, huge rows, row limit, corruption", async () => {
  const loc = "var/lib/rpm/rpmdb.sqlite";
  const refused = [
    // recursive: without the check it runs for as long as the counter allows
    "CREATE VIEW Packages AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c " +
    "WHERE x < 1000000000) SELECT x AS blob FROM c WHERE x < 0",
    // 100,001 rows of 16 KB from a file of a few KiB
    "CREATE VIEW Packages AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) " +
    "SELECT zeroblob(16000) AS blob FROM c",
    "CREATE TABLE t(x); CREATE VIEW packages AS SELECT x AS blob FROM t",
    "CREATE TABLE Packages(hnum INTEGER PRIMARY KEY, n INT, blob AS (zeroblob(n)))",
    "CREATE VIRTUAL TABLE Packages USING fts5(blob)",
    "CREATE TABLE Other(x)",
  ];
  for (const sql of refused) {
    const bytes = await sqliteBytes(sql);
    const inv = timed(sql, () => inventory(new Map([[loc, bytes]])));
    assert.deepEqual(inv.packages, [], sql);
    assert.match(inv.warnings[0], /not a readable rpm sqlite database/, sql);
  }
  // a real table: a LIMIT of the package budget, oversized blobs skipped unread
  const { DatabaseSync } = await import("node:sqlite");
  const dir = await Deno.makeTempDir({ prefix: "wharf-sqlite-" });
  try {
    const db = new DatabaseSync(join(dir, "db"));
    db.exec("CREATE TABLE Packages(hnum INTEGER PRIMARY KEY, blob BLOB NOT NULL)");
    const ins = db.prepare("INSERT INTO Packages(blob) VALUES (?)");
    for (let i = 0; i < 50; i++) ins.run(rpmHeaderBlob(`p${i}`, "1", "1"));
    ins.run(rpmHeaderBlob("big", "1", "1", 3 << 20));
    db.close();
    const bytes = await Deno.readFile(join(dir, "db"));
    const all = parseRpmSqlite(bytes, loc, { maxRpmHeaderBytes: 1 << 20 });
    assert.equal(all.packages.length, 50);
    assert.deepEqual(all.warnings, [`${loc}: 1 header(s) over 1048576 bytes skipped`]);
    const ten = parseRpmSqlite(bytes, loc, { maxPackages: 10 });
    assert.equal(ten.packages.length, 10);
    assert.deepEqual(ten.warnings, [`${loc}: more than 10 packages, the rest not listed`]);
    const budget = parseRpmSqlite(bytes, loc, { maxRpmReadBytes: 1000 });
    assert.ok(budget.packages.length < 50);
    assert.match(budget.warnings.join("\n"), /stopped after 1000 bytes of headers/);
    // corrupt pages: a warning, never an exception out of inventory()
    for (let seed = 1; seed <= 20; seed++) {
      const bad = bytes.slice();
      for (let i = 100; i < bad.length; i += 97 * seed) bad[i] ^= 0x5a;
      const inv = inventory(new Map([[loc, bad]]));
      assert.ok(inv.packages.length <= 51);
    }
    const cut = inventory(new Map([[loc, bytes.slice(0, 5000)]]));
    assert.ok(cut.packages.length <= 51);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/**
 * A BerkeleyDB hash file (little-endian) whose `refs` values all point at one overflow chain
 * holding `chain`; `loop` makes the chain's last page point back to its first.
 */
function bdbSharedChain(refs: number, chain: Uint8Array, pageSize = 65536, loop = false) {
  const per = pageSize - 26;
  const chainPages = Math.max(1, Math.ceil(chain.length / per));
  const pairsPerPage = Math.floor((pageSize - 26) / (4 + 5 + 12));
  const hashPages = Math.max(1, Math.ceil(refs / pairsPerPage));
  const pages = 1 + hashPages + chainPages;
  const b = new Uint8Array(pages * pageSize);
  const v = new DataView(b.buffer);
  v.setUint32(12, 0x061561, true);
  v.setUint32(20, pageSize, true);
  b[25] = 8;
  v.setUint32(32, pages - 1, true);
  const firstChain = 1 + hashPages;
  const total = loop ? chain.length * 4 : chain.length;
  for (let h = 0, ref = 0; h < hashPages; h++) {
    const at = (1 + h) * pageSize;
    const n = Math.min(pairsPerPage, refs - ref);
    b[at + 25] = 13;
    v.setUint16(at + 20, n * 2, true);
    let top = pageSize;
    for (let i = 0; i < n; i++, ref++) {
      top -= 5;
      b[at + top] = 1;
      v.setUint32(at + top + 1, ref + 1, true);
      v.setUint16(at + 26 + i * 4, top, true);
      top -= 12;
      b[at + top] = 3;
      v.setUint32(at + top + 4, firstChain, true);
      v.setUint32(at + top + 8, total, true);
      v.setUint16(at + 26 + i * 4 + 2, top, true);
    }
  }
  for (let c = 0; c < chainPages; c++) {
    const pg = firstChain + c;
    const at = pg * pageSize;
    b[at + 25] = 7;
    const piece = chain.subarray(c * per, (c + 1) * per);
    v.setUint16(at + 22, piece.length, true);
    v.setUint32(at + 16, c + 1 < chainPages ? pg + 1 : loop ? firstChain : 0, true);
    b.set(piece, at + 26);
  }
  return b;
}

Deno.test("hostile rpm BerkeleyDB: 1,500 items on one 1 MiB chain, loops, huge claims", () => {
  const loc = "var/lib/rpm/Packages";
  const header = rpmHeaderBlob("evil", "1", "1", 1 << 20);
  const shared = bdbSharedChain(1500, header);
  const r = timed("shared", () => parseRpmBdb(shared, loc));
  assert.deepEqual(r.packages.map((p) => p.name), ["evil"]);
  assert.deepEqual(r.warnings, [`${loc}: 1499 item(s) sharing another's overflow pages skipped`]);
  // a chain that loops back on itself
  const loop = timed("loop", () => parseRpmBdb(bdbSharedChain(3, header, 65536, true), loc));
  assert.deepEqual(loop.packages, []);
  // a header over the bound is skipped before anything is allocated for it
  const big = parseRpmBdb(shared, loc, { maxRpmHeaderBytes: 1 << 16 });
  assert.deepEqual(big.packages, []);
  assert.match(big.warnings[0], /1500 header\(s\) over 65536 bytes skipped/);
  const budget = parseRpmBdb(shared, loc, { maxRpmReadBytes: 1000 });
  assert.deepEqual(budget.packages, []);
  assert.match(budget.warnings[0], /stopped after 1000 bytes of headers/);
  // a claimed length past what the file can hold
  const claim = bdbSharedChain(1, rpmHeaderBlob("x", "1", "1"));
  new DataView(claim.buffer).setUint32(65536 + 65536 - 17 + 8, 0x7fffffff, true);
  assert.deepEqual(parseRpmBdb(claim, loc).packages, []);
  // 100,000 string entries all pointing at a 1 MiB string: only the kept tags are read
  const il = 100_000, dl = 1 << 20;
  const blob = new Uint8Array(8 + il * 16 + dl);
  const v = new DataView(blob.buffer);
  v.setUint32(0, il);
  v.setUint32(4, dl);
  for (let i = 0; i < il; i++) {
    v.setUint32(8 + i * 16, 2000 + i);
    v.setUint32(12 + i * 16, 6);
  }
  blob.fill(0x61, 8 + il * 16, blob.length - 1);
  assert.throws(() => timed("index", () => parseRpmHeaderBlob(blob)), RpmHeaderError);
});
