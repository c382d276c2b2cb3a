// Each order against the real tool where one exists here: thousands of generated pairs checked by
// `dpkg --compare-versions` and by rpm's own `rpm.vercmp` (through rpm's Lua), in one process each.
import assert from "node:assert/strict";
import { join } from "node:path";
import { missingReason, runs } from "../../tests/e2e/_tools.ts";
import {
  compareApk,
  compareDpkg,
  comparePep440,
  compareRpm,
  compareSemver,
  dpkgValid,
  rpmvercmp,
} from "./vercmp.ts";

const dpkgMissing = missingReason(
  "dpkg version order",
  runs("dpkg", ["--version"]) ? [] : ["dpkg"],
  "Debian's dpkg",
);
const rpmMissing = missingReason(
  "rpm version order",
  runs("rpm", ["--version"]) ? [] : ["rpm"],
  "apt-get install rpm",
);

// Debian's python3 with python3-packaging (CI installs both); another python3 on PATH will do.
const python = ["/usr/bin/python3", "python3"].find((p) =>
  runs(p, ["-c", "import packaging.version"])
);
const pythonMissing = missingReason(
  "PEP 440 version order",
  python ? [] : ["python3 with packaging"],
  "apt-get install python3-packaging",
);

/** A seeded generator, so a failure names a reproducible pair. */
function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function pairs(
  n: number,
  pieces: string[],
  seed: number,
  wrap: (s: string, r: () => number) => string,
) {
  const r = rng(seed);
  const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)];
  const gen = () => {
    let s = String(Math.floor(r() * 12));
    const len = 1 + Math.floor(r() * 5);
    for (let i = 0; i < len; i++) s += pick(pieces);
    return wrap(s, r);
  };
  const out: [string, string][] = [];
  for (let i = 0; i < n; i++) {
    const a = gen();
    // Half the pairs share a prefix, where the order is decided by the tricky tail.
    const b = r() < 0.5 ? a.slice(0, Math.floor(r() * a.length) + 1) + gen().slice(1) : gen();
    out.push([a, r() < 0.1 ? a : b]);
  }
  return out;
}

async function bash(script: string): Promise<string[]> {
  const dir = await Deno.makeTempDir();
  try {
    const f = join(dir, "run.sh");
    await Deno.writeTextFile(f, script);
    const o = await new Deno.Command("bash", { args: [f] }).output();
    assert.equal(o.code, 0, new TextDecoder().decode(o.stderr));
    return new TextDecoder().decode(o.stdout).trim().split("\n");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("dpkg: hand-picked cases (epochs, tildes, revisions, long digit runs)", () => {
  const lt: [string, string][] = [
    ["1.0~rc1", "1.0"],
    ["1.0~~", "1.0~"],
    ["1.0~~a", "1.0~"],
    ["1.0", "1.0a"],
    ["1.0a", "1.0+"],
    ["1.0+", "1.0."],
    ["1:0.1", "2:0.0"],
    ["1.2.14", "1:1.2.13"],
    ["2.0-1", "2.0-1+b1"],
    ["1:2.3-4-5", "1:2.3-4-6"],
    ["3.0.11-1~deb12u1", "3.0.11-1~deb12u2"],
    ["3.0.11-1~deb12u2", "3.0.11-1"],
    ["9", "10"],
    ["99999999999999999999998", "99999999999999999999999"],
    ["1.0", "1.0-0.1"],
  ];
  for (const [a, b] of lt) {
    assert.equal(compareDpkg(a, b), -1, `${a} < ${b}`);
    assert.equal(compareDpkg(b, a), 1, `${b} > ${a}`);
  }
  for (const [a, b] of [["1.0", "1.00"], ["0:1.0", "1.0"], ["1.0-0", "1.0"], ["01", "1"]]) {
    assert.equal(compareDpkg(a, b), 0, `${a} = ${b}`);
  }
  assert.equal(dpkgValid("1:2.3-4"), true);
  assert.equal(dpkgValid("a:1"), false);
  assert.equal(dpkgValid(""), false);
  assert.equal(dpkgValid("1.0 beta"), false);
  // A hostile 1 MB version compares in linear time.
  const big = "1." + "9".repeat(1_000_000);
  const t = performance.now();
  assert.equal(compareDpkg(big, big + "1"), -1);
  assert.ok(performance.now() - t < 5000);
});

Deno.test({
  name: "dpkg: 2,000+ generated pairs agree with dpkg --compare-versions",
  ignore: dpkgMissing !== null,
  fn: async () => {
    const ps = pairs(
      2200,
      ["", ".", "~", "+", "a", "b", "z", "0", "1", "9", "~rc", "+b", ".0", "00"],
      7,
      (s, r) => {
        let v = s;
        if (r() < 0.3) {
          v = `${Math.floor(r() * 3)}:${v}`;
        }
        if (r() < 0.5) {
          v = `${v}-${Math.floor(r() * 4)}${r() < 0.3 ? "~deb" + Math.floor(r() * 3) : ""}`;
        }
        return v;
      },
    ).filter(([a, b]) => dpkgValid(a) && dpkgValid(b));
    assert.ok(ps.length > 2000, `${ps.length} valid pairs`);
    const lines = ps.map(([a, b]) =>
      `if dpkg --compare-versions '${a}' lt '${b}'; then echo -1; elif dpkg --compare-versions '${a}' eq '${b}'; then echo 0; else echo 1; fi`
    );
    const got = await bash(lines.join("\n") + "\n");
    assert.equal(got.length, ps.length);
    const wrong = ps.filter(([a, b], i) => compareDpkg(a, b) !== Number(got[i]));
    assert.deepEqual(
      wrong.slice(0, 10).map(([a, b]) =>
        `${a} vs ${b}: dpkg ${got[ps.findIndex((p) => p[0] === a && p[1] === b)]}, ours ${
          compareDpkg(a, b)
        }`
      ),
      [],
    );
  },
});

Deno.test("rpm: hand-picked cases (tilde, caret, alpha vs numeric, epochs)", () => {
  const lt: [string, string][] = [
    ["1.0~rc1", "1.0"],
    ["1.0", "1.0^git1"],
    ["1.0^git1", "1.0.1"],
    ["1.0^", "1.0^1"],
    ["1.0a", "1.0.1"],
    ["a", "1"],
    ["1.0", "1.0.0"],
    ["2.0", "10"],
    ["1.0_1", "1.0.2"],
  ];
  for (const [a, b] of lt) {
    assert.equal(rpmvercmp(a, b), -1, `${a} < ${b}`);
    assert.equal(rpmvercmp(b, a), 1, `${b} > ${a}`);
  }
  assert.equal(rpmvercmp("1.0", "1_0"), 0);
  assert.equal(rpmvercmp("001", "1"), 0);
  assert.equal(compareRpm("2:1.0-1", "1:9.9-9"), 1);
  assert.equal(compareRpm("1.0-1.el9", "1.0-2.el9"), -1);
  assert.equal(compareRpm("1.0", "1.0-7.el9"), 0, "no release on one side matches any");
  assert.equal(compareRpm("0:1.0-1", "1.0-1"), 0);
});

Deno.test({
  name: "rpm: 3,000 generated pairs agree with rpm's own rpm.vercmp",
  ignore: rpmMissing !== null,
  fn: async () => {
    const ps = pairs(
      3000,
      ["", ".", "~", "^", "_", "a", "b", "Z", "0", "1", "9", "rc", "git", "00", "-"],
      11,
      (s) => s,
    )
      .map(([a, b]) => [a.replaceAll("-", "."), b.replaceAll("-", ".")] as [string, string]);
    // One rpm process: a Lua loop over the pairs, one result per line.
    // rpm's Lua print() writes into the macro's expansion without separators: add our own.
    const lua = ps.map(([a, b]) =>
      `print(rpm.vercmp(${JSON.stringify(a)}, ${JSON.stringify(b)}) .. ";")`
    ).join("\n");
    const dir = await Deno.makeTempDir();
    try {
      await Deno.writeTextFile(join(dir, "cmp.lua"), lua);
      const out = await bash(`rpm --eval '%{lua: dofile("${join(dir, "cmp.lua")}")}'\n`);
      const got = out.join("").split(";").filter((x) => x !== "");
      assert.equal(got.length, ps.length);
      const wrong = ps.map(([a, b], i) => ({ a, b, rpm: Number(got[i]), ours: rpmvercmp(a, b) }))
        .filter((x) => sign(x.rpm) !== x.ours);
      assert.deepEqual(wrong.slice(0, 10), []);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

const sign = (n: number) => (n < 0 ? -1 : n > 0 ? 1 : 0);

Deno.test("apk: every pair of a list in apk's documented order compares consistently", () => {
  // apk-tools' order: numbers, then a letter, then suffixes (_alpha < _beta < _pre < _rc < none <
  // _cvs < _svn < _git < _hg < _p, each with an optional number), then the -rN revision.
  const ordered = [
    "0.9",
    "1.0_alpha",
    "1.0_alpha1",
    "1.0_alpha2",
    "1.0_beta",
    "1.0_beta3",
    "1.0_pre1",
    "1.0_rc1",
    "1.0_rc2",
    "1.0",
    "1.0-r1",
    "1.0-r2",
    "1.0-r10",
    "1.0_cvs",
    "1.0_svn",
    "1.0_git20240101",
    "1.0_hg",
    "1.0_p1",
    "1.0_p2",
    "1.0_p2-r1",
    "1.0a",
    "1.0b",
    "1.0b_p1",
    "1.0.1_rc1",
    "1.0.1",
    "1.0.2",
    "1.0.10",
    "1.1",
    "1.2.3_alpha1_p2",
    "1.2.3",
    "3.3.2-r0",
    "3.3.2-r1",
    "10",
  ];
  for (let i = 0; i < ordered.length; i++) {
    for (let j = 0; j < ordered.length; j++) {
      assert.equal(
        compareApk(ordered[i], ordered[j]),
        sign(i - j),
        `${ordered[i]} vs ${ordered[j]}`,
      );
    }
  }
  assert.equal(compareApk("1.0-r0", "1.0"), 0);
  // Garbage still has a place, and never throws.
  assert.equal(compareApk("junk", "junk"), 0);
  assert.equal(typeof compareApk("1.0_whatever", "1.0"), "number");
});

/** Valid PEP 440 versions from the grammar's parts: epochs, pre, post, dev, local, zero pads. */
function pep440Versions(n: number, seed: number): string[] {
  const r = rng(seed);
  const pick = <T>(xs: T[]) => xs[Math.floor(r() * xs.length)];
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    let v = r() < 0.1 ? `${Math.floor(r() * 3)}!` : "";
    const parts = 1 + Math.floor(r() * 4);
    v += Array.from({ length: parts }, () => pick(["0", "1", "2", "10", "01", "3"])).join(".");
    if (r() < 0.35) {
      v += pick(["a", "b", "rc", "alpha", "beta", "c", "pre", "preview"]) +
        pick(["", "0", "1", "2"]);
    }
    if (r() < 0.25) v += pick([".post", "-post", "post", "-", ".rev", "r"]) + pick(["1", "2", "0"]);
    if (r() < 0.2) v += pick([".dev", "dev"]) + pick(["", "0", "1"]);
    if (r() < 0.1) v += "+" + pick(["local", "ubuntu1", "1.2", "abc.5"]);
    out.push(r() < 0.05 ? v.toUpperCase() : v);
  }
  return out;
}

Deno.test({
  name: "PEP 440: 3,000 generated pairs ordered as Python's packaging orders them",
  ignore: pythonMissing !== null,
  fn: async () => {
    const a = pep440Versions(3000, 7);
    const b = pep440Versions(3000, 11).map((v, i) => (i % 10 === 0 ? a[i] : v));
    const dir = await Deno.makeTempDir();
    try {
      const f = join(dir, "pairs.json");
      await Deno.writeTextFile(f, JSON.stringify(a.map((x, i) => [x, b[i]])));
      const py = [
        "import json, sys",
        "from packaging.version import Version",
        "for x, y in json.load(open(sys.argv[1])):",
        "    vx, vy = Version(x), Version(y)",
        "    print((vx > vy) - (vx < vy))",
      ].join("\n");
      const o = await new Deno.Command(python!, { args: ["-c", py, f] }).output();
      assert.equal(o.code, 0, new TextDecoder().decode(o.stderr));
      const want = new TextDecoder().decode(o.stdout).trim().split("\n").map(Number);
      assert.equal(want.length, a.length);
      const wrong = a.map((x, i) => [x, b[i], comparePep440(x, b[i]), want[i]])
        .filter(([, , got, w]) => got !== w);
      assert.deepEqual(wrong.slice(0, 10), [], `${wrong.length} of ${a.length} pairs differ`);
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("PEP 440 and semver: documented orders; invalid versions throw (no evidence)", () => {
  const pep = [
    "1.0.dev0",
    "1.0a1",
    "1.0a2.dev1",
    "1.0b1",
    "1.0rc1",
    "1.0",
    "1.0+local",
    "1.0.post1",
    "1.1",
    "1!0.1",
  ];
  for (let i = 1; i < pep.length; i++) assert.equal(comparePep440(pep[i - 1], pep[i]), -1, pep[i]);
  assert.equal(comparePep440("1.0", "1.0.0"), 0);
  assert.throws(() => comparePep440("not a version", "1.0"));
  const sem = [
    "1.0.0-alpha",
    "1.0.0-alpha.1",
    "1.0.0-alpha.beta",
    "1.0.0-beta",
    "1.0.0-beta.2",
    "1.0.0-beta.11",
    "1.0.0-rc.1",
    "1.0.0",
    "1.0.1",
    "1.10.0",
    "2.0.0",
  ];
  for (let i = 1; i < sem.length; i++) assert.equal(compareSemver(sem[i - 1], sem[i]), -1, sem[i]);
  assert.equal(compareSemver("v1.2.3", "1.2.3"), 0);
  assert.throws(() => compareSemver("latest", "1.0.0"));
});
