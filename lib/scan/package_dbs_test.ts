import assert from "node:assert/strict";
import { join } from "node:path";
import { missingReason, runs } from "../../tests/e2e/_tools.ts";
import { inventory, parseApkInstalled, parseDpkgStatus } from "./package_dbs.ts";
import {
  parseRpmBdb,
  parseRpmHeaderBlob,
  parseRpmSqlite,
  RpmHeaderError,
  sourceName,
} from "./rpmdb.ts";
import { advisoryEcosystems, osFromReleaseFiles, parseOsRelease } from "./os_release.ts";

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
