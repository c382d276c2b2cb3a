// Version order of the three distro package formats, as their own tools define it, for matching
// installed packages against advisory ranges. Each is a port of the tool's comparison (dpkg's
// verrevcmp, rpm's rpmvercmp, apk-tools' token order), written here: the npm ports found compare
// only well-formed versions (throwing or guessing on the rest) and none covers all three. Every
// function runs in one pass over its inputs (no regex backtracking, no recursion) and never
// throws: anything a package database can hold has a place in the order.
//
// Language packages use their ecosystem's maintained reference libraries instead: npm's own
// `semver` and renovate's PEP 440 port (checked against Python's `packaging` in the tests). Those
// throw on a version outside their grammar, which the matcher takes as no evidence.
import semver from "semver";
import { compare as pep440Compare, valid as pep440Valid } from "@renovatebot/pep440";

export type VersionScheme = "dpkg" | "rpm" | "apk" | "semver" | "pep440";

const isDigit = (c: number) => c >= 48 && c <= 57;
const isAlpha = (c: number) => (c >= 65 && c <= 90) || (c >= 97 && c <= 122);

/** Two digit runs compared as numbers of any length: leading zeros off, then length, then text. */
function numCmp(a: string, b: string): number {
  let i = 0;
  while (i < a.length - 1 && a[i] === "0") i++;
  let j = 0;
  while (j < b.length - 1 && b[j] === "0") j++;
  const x = a.slice(i), y = b.slice(j);
  if (x.length !== y.length) return x.length < y.length ? -1 : 1;
  return x < y ? -1 : x > y ? 1 : 0;
}

const sign = (n: number) => (n < 0 ? -1 : n > 0 ? 1 : 0);

// ---- dpkg -----------------------------------------------------------------------------------

/** dpkg's character order: `~` before everything (the end of the string included), letters
 * before other characters. */
function dpkgOrder(s: string, i: number): number {
  if (i >= s.length) return 0;
  const c = s.charCodeAt(i);
  if (isDigit(c)) return 0;
  if (isAlpha(c)) return c;
  if (c === 126) return -1; // ~
  return c + 256;
}

/** dpkg's verrevcmp: alternating non-digit and digit runs. */
function verrevcmp(a: string, b: string): number {
  let i = 0, j = 0;
  while (i < a.length || j < b.length) {
    while (
      (i < a.length && !isDigit(a.charCodeAt(i))) || (j < b.length && !isDigit(b.charCodeAt(j)))
    ) {
      const ac = dpkgOrder(a, i), bc = dpkgOrder(b, j);
      if (ac !== bc) return sign(ac - bc);
      i++;
      j++;
    }
    let si = i;
    while (i < a.length && isDigit(a.charCodeAt(i))) i++;
    let sj = j;
    while (j < b.length && isDigit(b.charCodeAt(j))) j++;
    const x = a.slice(si, i), y = b.slice(sj, j);
    si = sj = 0;
    const c = numCmp(x || "0", y || "0");
    if (c) return c;
  }
  return 0;
}

export interface DpkgVersion {
  epoch: string;
  upstream: string;
  revision: string;
}

/** Epoch before the first `:`, revision after the last `-` (dpkg's parseversion). */
export function splitDpkg(v: string): DpkgVersion {
  const s = v.trim();
  const colon = s.indexOf(":");
  let epoch = "0";
  let rest = s;
  if (colon >= 0 && /^\d+$/.test(s.slice(0, colon))) {
    epoch = s.slice(0, colon);
    rest = s.slice(colon + 1);
  }
  const dash = rest.lastIndexOf("-");
  return dash >= 0
    ? { epoch, upstream: rest.slice(0, dash), revision: rest.slice(dash + 1) }
    : { epoch, upstream: rest, revision: "" };
}

export function compareDpkg(a: string, b: string): number {
  const x = splitDpkg(a), y = splitDpkg(b);
  return numCmp(x.epoch, y.epoch) || verrevcmp(x.upstream, y.upstream) ||
    verrevcmp(x.revision, y.revision);
}

/** What dpkg accepts: an optional numeric epoch, an upstream starting with a digit and made of
 * alphanumerics and `.+~-:` (`-` only with a revision), a revision of alphanumerics and `.+~`. */
export function dpkgValid(v: string): boolean {
  if (v.length === 0 || v.length > 4096 || /\s/.test(v)) return false;
  const colon = v.indexOf(":");
  if (colon >= 0 && !/^\d+$/.test(v.slice(0, colon))) return false;
  const { upstream, revision } = splitDpkg(v);
  const hasRevision = v.slice(colon + 1).includes("-");
  if (!/^[0-9][A-Za-z0-9.+~:-]*$/.test(upstream)) return false;
  if (!hasRevision && upstream.includes("-")) return false;
  return !hasRevision || /^[A-Za-z0-9.+~]+$/.test(revision);
}

// ---- rpm ------------------------------------------------------------------------------------

/** rpm's rpmvercmp (rpm 4.18): alphanumeric segments, `~` sorting first, `^` after the end. */
export function rpmvercmp(a: string, b: string): number {
  if (a === b) return 0;
  let i = 0, j = 0;
  const sep = (s: string, k: number) => {
    const c = s.charCodeAt(k);
    return !isDigit(c) && !isAlpha(c) && c !== 126 && c !== 94;
  };
  while (i < a.length || j < b.length) {
    while (i < a.length && sep(a, i)) i++;
    while (j < b.length && sep(b, j)) j++;
    const ca = a[i], cb = b[j];
    if (ca === "~" || cb === "~") {
      if (ca !== "~") return 1;
      if (cb !== "~") return -1;
      i++;
      j++;
      continue;
    }
    if (ca === "^" || cb === "^") {
      if (i >= a.length) return -1;
      if (j >= b.length) return 1;
      if (ca !== "^") return 1;
      if (cb !== "^") return -1;
      i++;
      j++;
      continue;
    }
    if (!(i < a.length && j < b.length)) break;
    const si = i, sj = j;
    let num: boolean;
    if (isDigit(a.charCodeAt(i))) {
      while (i < a.length && isDigit(a.charCodeAt(i))) i++;
      while (j < b.length && isDigit(b.charCodeAt(j))) j++;
      num = true;
    } else {
      while (i < a.length && isAlpha(a.charCodeAt(i))) i++;
      while (j < b.length && isAlpha(b.charCodeAt(j))) j++;
      num = false;
    }
    // A numeric segment beats an alphabetic one.
    if (sj === j) return num ? 1 : -1;
    const x = a.slice(si, i), y = b.slice(sj, j);
    const c = num ? numCmp(x, y) : (x < y ? -1 : x > y ? 1 : 0);
    if (c) return c;
  }
  if (i >= a.length && j >= b.length) return 0;
  return i >= a.length ? -1 : 1;
}

export function splitEvr(v: string): { epoch: string; version: string; release: string | null } {
  const s = v.trim();
  const colon = s.indexOf(":");
  let epoch = "0";
  let rest = s;
  if (colon >= 0 && /^\d*$/.test(s.slice(0, colon))) {
    epoch = s.slice(0, colon) || "0";
    rest = s.slice(colon + 1);
  }
  const dash = rest.lastIndexOf("-");
  return dash >= 0
    ? { epoch, version: rest.slice(0, dash), release: rest.slice(dash + 1) }
    : { epoch, version: rest, release: null };
}

/** `[epoch:]version[-release]`; a side without a release matches any release (as dnf does). */
export function compareRpm(a: string, b: string): number {
  const x = splitEvr(a), y = splitEvr(b);
  const e = numCmp(x.epoch, y.epoch);
  if (e) return e;
  const v = rpmvercmp(x.version, y.version);
  if (v) return v;
  if (x.release === null || y.release === null) return 0;
  return rpmvercmp(x.release, y.release);
}

// ---- apk ------------------------------------------------------------------------------------

/** apk-tools' suffix order: pre-releases below the bare version, post-releases above. */
const APK_SUFFIX: Record<string, number> = {
  alpha: -4,
  beta: -3,
  pre: -2,
  rc: -1,
  cvs: 1,
  svn: 2,
  git: 3,
  hg: 4,
  p: 5,
};

interface ApkVersion {
  numbers: string[];
  letter: string;
  suffixes: { rank: number; n: string }[];
  revision: string;
  /** text that is not part of the grammar, compared last as plain text */
  rest: string;
}

function parseApk(v: string): ApkVersion {
  const s = v.trim();
  let i = 0;
  const numbers: string[] = [];
  for (;;) {
    const st = i;
    while (i < s.length && isDigit(s.charCodeAt(i))) i++;
    if (i === st) break;
    numbers.push(s.slice(st, i));
    if (s[i] === "." && isDigit(s.charCodeAt(i + 1))) i++;
    else break;
  }
  let letter = "";
  if (
    i < s.length && s.charCodeAt(i) >= 97 && s.charCodeAt(i) <= 122 && !isAlpha(s.charCodeAt(i + 1))
  ) {
    letter = s[i++];
  }
  const suffixes: { rank: number; n: string }[] = [];
  while (s[i] === "_") {
    let k = i + 1;
    while (k < s.length && s.charCodeAt(k) >= 97 && s.charCodeAt(k) <= 122) k++;
    const rank = APK_SUFFIX[s.slice(i + 1, k)];
    if (rank === undefined) break;
    const st = k;
    while (k < s.length && isDigit(s.charCodeAt(k))) k++;
    suffixes.push({ rank, n: s.slice(st, k) || "0" });
    i = k;
  }
  let revision = "0";
  if (s[i] === "-" && s[i + 1] === "r" && isDigit(s.charCodeAt(i + 2))) {
    let k = i + 2;
    while (k < s.length && isDigit(s.charCodeAt(k))) k++;
    revision = s.slice(i + 2, k);
    i = k;
  }
  return { numbers, letter, suffixes, revision, rest: s.slice(i) };
}

export function compareApk(a: string, b: string): number {
  const x = parseApk(a), y = parseApk(b);
  const n = Math.min(x.numbers.length, y.numbers.length);
  for (let k = 0; k < n; k++) {
    // apk compares a component with a leading zero (after the first) as a decimal fraction.
    const p = x.numbers[k], q = y.numbers[k];
    const c = k > 0 && (p[0] === "0" || q[0] === "0") ? (p < q ? -1 : p > q ? 1 : 0) : numCmp(p, q);
    if (c) return c;
  }
  if (x.numbers.length !== y.numbers.length) return x.numbers.length > y.numbers.length ? 1 : -1;
  if (x.letter !== y.letter) return x.letter < y.letter ? -1 : 1;
  const m = Math.max(x.suffixes.length, y.suffixes.length);
  for (let k = 0; k < m; k++) {
    const p = x.suffixes[k] ?? { rank: 0, n: "0" }, q = y.suffixes[k] ?? { rank: 0, n: "0" };
    if (p.rank !== q.rank) return p.rank < q.rank ? -1 : 1;
    const c = numCmp(p.n, q.n);
    if (c) return c;
  }
  const r = numCmp(x.revision, y.revision);
  if (r) return r;
  return x.rest < y.rest ? -1 : x.rest > y.rest ? 1 : 0;
}

export function comparePep440(a: string, b: string): number {
  if (!pep440Valid(a) || !pep440Valid(b)) throw new Error(`not a PEP 440 version: ${a} / ${b}`);
  return Math.sign(pep440Compare(a, b));
}

export function compareSemver(a: string, b: string): number {
  return semver.compare(a, b, { loose: true });
}

export function compareVersions(scheme: VersionScheme, a: string, b: string): number {
  switch (scheme) {
    case "dpkg":
      return compareDpkg(a, b);
    case "rpm":
      return compareRpm(a, b);
    case "apk":
      return compareApk(a, b);
    case "semver":
      return compareSemver(a, b);
    case "pep440":
      return comparePep440(a, b);
  }
}
