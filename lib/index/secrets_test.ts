// The secret scan: each of SPEC's 12 kinds with positives and near-miss negatives, file-name
// bindings, EXAMPLE values, line numbers and order, CRLF, chunk boundaries at every byte, the
// 64 KiB line limit, and a large file streamed in chunks.
import assert from "node:assert/strict";
import { MAX_SECRET_FINDINGS, MAX_SECRET_SCAN_BYTES, SecretScanner } from "./secrets.ts";

const enc = new TextEncoder();

function scan(path: string, text: string, chunk = 0): { kind: string; line: number }[] {
  const s = new SecretScanner(path);
  const b = enc.encode(text);
  if (chunk <= 0) s.push(b);
  else for (let i = 0; i < b.length; i += chunk) s.push(b.subarray(i, i + chunk));
  return s.finish();
}

const kinds = (path: string, text: string) => scan(path, text).map((f) => f.kind);

// Tokens built from parts so the file itself reads as test data.
const alnum = (n: number, seed = 7) => {
  const abc = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  let s = "";
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    s += abc[x % abc.length];
  }
  return s.replace(/^[0-9]/, "a").slice(0, n - 1) + "7";
};
const B64_KEY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7" + "x".repeat(10);

const POSITIVES: [string, string, string][] = [
  // [kind, path, text]
  [
    "private-key",
    "etc/ssl/private/key.pem",
    `-----BEGIN PRIVATE KEY-----\n${B64_KEY}\n-----END PRIVATE KEY-----\n`,
  ],
  [
    "private-key",
    "root/.ssh/id_rsa",
    `-----BEGIN RSA PRIVATE KEY-----\n${B64_KEY}\n-----END RSA PRIVATE KEY-----\n`,
  ],
  [
    "private-key",
    "home/u/.ssh/id_ed25519",
    `-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ${
      "A".repeat(8)
    }\n-----END OPENSSH PRIVATE KEY-----\n`,
  ],
  [
    "private-key",
    "srv/key.asc",
    `-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF${
      "x".repeat(40)
    }\n-----END PGP PRIVATE KEY BLOCK-----\n`,
  ],
  [
    "private-key",
    "app/service-account.json",
    `{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\n${B64_KEY}\\n-----END PRIVATE KEY-----\\n"}\n`,
  ],
  [
    "cloudA-credentials",
    "root/.aws/credentials",
    `[default]\naws_access_key_id = AKIA${"Q".repeat(15)}7\naws_secret_access_key = ${alnum(40)}\n`,
  ],
  ["cloudA-access-key", "app/settings.py", `KEY = "AKIA${"ABCD2345EFGH6789"}"\n`],
  ["cloudA-access-key", "app/env", `export K=ASIA${"Z3Y4X5W6V7U8T9S2"}\n`],
  ["hostA-token", "app/.env", `GH=ghp_${alnum(36)}\n`],
  ["hostA-token", "app/ci.yml", `token: ghs_${alnum(36, 3)}\n`],
  ["hostA-token", "app/ci.yml", `token: github_pat_${alnum(22)}_${alnum(59, 5)}\n`],
  ["hostB-token", "app/.env", `GL=glpat-${alnum(20)}\n`],
  ["chat-token", "app/.env", `SLACK=xoxb-1234567890-1234567890123-${alnum(24)}\n`],
  ["chat-token", "app/.env", `SLACK=xoxp-${alnum(30, 9)}\n`],
  ["payment-key", "app/.env", `STRIPE=sk_live_${alnum(24)}\n`],
  ["payment-key", "app/.env", `STRIPE=rk_live_${alnum(24, 4)}\n`],
  [
    "registry-auth",
    "root/.docker/config.json",
    `{"auths":{"r.example.com":{"auth":"${btoa("user:s3cretpass")}"}}}\n`,
  ],
  [
    "registry-auth",
    "run/containers/0/auth.json",
    `{\n  "auths": {\n    "quay.io": {\n      "auth": "${
      btoa("bot:Zx9longpassword")
    }"\n    }\n  }\n}\n`,
  ],
  [
    "cluster-config",
    "root/.kube/config",
    `users:\n- name: admin\n  user:\n    client-key-data: ${btoa("x".repeat(60))}\n`,
  ],
  ["cluster-config", "etc/admin.kubeconfig", `users:\n- user:\n    token: ${alnum(40)}\n`],
  ["npm-token", "home/u/.npmrc", `//registry.npmjs.org/:_authToken=npm_${alnum(36)}\n`],
  ["npm-token", "usr/etc/npmrc", `_auth = ${btoa("u:p4ssword")}\n`],
  ["npm-token", "home/u/.npmrc", `//r.example.com/:_password=${btoa("hunter22")}\n`],
  ["git-credentials", "root/.git-credentials", `https://alice:${alnum(20)}@github.com\n`],
  ["git-credentials", "home/u/.config/git/credentials", `https://bob:pw1234xyz@git.example\n`],
  ["netrc", "root/.netrc", `machine api.example.com\n  login alice\n  password ${alnum(16)}\n`],
  ["netrc", "root/.netrc", `machine h login a password Pw0rdValue99\n`],
];

Deno.test("secrets: every kind is found in its positives", () => {
  const seen = new Set<string>();
  for (const [kind, path, text] of POSITIVES) {
    const found = kinds(path, text);
    assert.ok(found.includes(kind), `${kind} in ${path}: got ${JSON.stringify(found)}\n${text}`);
    seen.add(kind);
  }
  assert.equal(seen.size, 12, "all 12 kinds have positives");
});

const NEGATIVES: [string, string, string][] = [
  // [why, path, text]
  [
    "a public key",
    "etc/ssl/pub.pem",
    `-----BEGIN PUBLIC KEY-----\n${B64_KEY}\n-----END PUBLIC KEY-----\n`,
  ],
  [
    "a BEGIN line with no key material",
    "doc/README",
    "-----BEGIN PRIVATE KEY-----\n-----END PRIVATE KEY-----\n",
  ],
  [
    "a BEGIN line not at the start of a line",
    "doc/x.md",
    `use "-----BEGIN PRIVATE KEY-----" headers\n`,
  ],
  [
    "a certificate",
    "etc/c.pem",
    `-----BEGIN CERTIFICATE-----\n${B64_KEY}\n-----END CERTIFICATE-----\n`,
  ],
  ["the documentation key id", "doc/aws.md", "aws_access_key_id = AKIAIOSFODNN7EXAMPLE\n"],
  [
    "the documentation secret",
    "doc/aws.md",
    "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n",
  ],
  ["a short secret", "root/.aws/credentials", "aws_secret_access_key = abc123\n"],
  ["an all-letters key id", "app/x", "AKIAABCDEFGHIJKLMNOP\n"],
  ["an all-letters token", "app/x", `ghp_${"a".repeat(36)}\n`],
  ["an all-digits token", "app/x", `glpat-${"1".repeat(20)}\n`],
  ["a too-short token", "app/x", "ghp_ab12\n"],
  ["a placeholder", "app/x", `sk_live_${"x".repeat(24)}\n`],
  ["a test key", "app/x", `sk_test_${alnum(24)}\n`],
  ["a docker auth outside a credentials file", "app/config.json", `{"auth":"${btoa("u:p4ss")}"}\n`],
  ["a kube token outside a kubeconfig", "app/values.yaml", `token: ${alnum(40)}\n`],
  ["an npm token outside an rc file", "app/README.md", `_authToken=npm_${alnum(36)}\n`],
  ["a URL with a user only", "root/.git-credentials", "https://alice@github.com\n"],
  ["git credentials outside the file", "app/notes.txt", "https://alice:pw1234xyz@github.com\n"],
  ["a netrc password elsewhere", "app/notes.txt", "machine h login a password Pw0rdValue99\n"],
  ["EXAMPLE in a token", "app/x", `ghp_EXAMPLE${alnum(31)}\n`],
];

Deno.test("secrets: near misses are not reported", () => {
  for (const [why, path, text] of NEGATIVES) {
    assert.deepEqual(kinds(path, text), [], `${why} (${path})`);
  }
});

Deno.test("secrets: line numbers, order, CRLF, every chunk boundary", () => {
  const text = [
    "# config",
    `A=ghp_${alnum(36)}`,
    "",
    `B=glpat-${alnum(20)}`,
    `C=xoxb-${alnum(30)} D=sk_live_${alnum(24)}`,
    "-----BEGIN EC PRIVATE KEY-----",
    B64_KEY,
    "-----END EC PRIVATE KEY-----",
  ].join("\n") + "\n";
  const want = [
    { kind: "hostA-token", line: 2 },
    { kind: "hostB-token", line: 4 },
    { kind: "chat-token", line: 5 },
    { kind: "payment-key", line: 5 },
    { kind: "private-key", line: 6 },
  ];
  const whole = scan("app/env", text);
  assert.deepEqual(
    whole.map((f) => [f.line, f.kind]).sort(),
    want.map((f) => [f.line, f.kind]).sort(),
  );
  assert.deepEqual(whole.map((f) => f.line), [...whole.map((f) => f.line)].sort((a, b) => a - b));
  for (let c = 1; c <= 17; c++) assert.deepEqual(scan("app/env", text, c), whole, `chunk ${c}`);
  assert.deepEqual(scan("app/env", text.replaceAll("\n", "\r\n")), whole, "CRLF");
  // a multi-byte UTF-8 character split across chunks changes nothing
  const utf = `# ключ 🔑\nA=ghp_${alnum(36)}\n`;
  for (let c = 1; c <= 5; c++) {
    assert.deepEqual(scan("a/x", utf, c), [{ kind: "hostA-token", line: 2 }]);
  }
});

Deno.test("secrets: a line is read up to its first 64 KiB", () => {
  const token = `ghp_${alnum(36)}`;
  const before = `x=${token} ` + "a".repeat(100 * 1024) + "\n";
  assert.deepEqual(kinds("a/x", before), ["hostA-token"]);
  const after = "a".repeat(70 * 1024) + ` ${token}\nnext line ${`glpat-${alnum(20)}`}\n`;
  assert.deepEqual(scan("a/x", after), [{ kind: "hostB-token", line: 2 }]);
});

Deno.test("secrets: a 10 MiB file streamed in 64 KiB chunks", () => {
  const line = "just some ordinary configuration text, key = value, nothing to see\n";
  const body = line.repeat(Math.ceil((10 * 1024 * 1024) / line.length));
  const text = body + `T=ghp_${alnum(36)}\n`;
  const t = performance.now();
  const found = scan("var/log/big.log", text, 64 * 1024);
  assert.deepEqual(found.map((f) => f.kind), ["hostA-token"]);
  assert.equal(found[0].line, body.split("\n").length);
  // not a timing target: a scan that went quadratic would take minutes, not seconds
  assert.ok(performance.now() - t < 30_000);
});

// Hostile files (issue 22): a dump of tokens, a file past the byte budget, and long lines shaped
// to make each rule backtrack. A super-linear pattern shows up as seconds to minutes here.
const GUARD_MS = 3000;

Deno.test("secrets: 5 million AKIA lines stop at maxFindings, fast and small", () => {
  const t0 = performance.now();
  const s = new SecretScanner("app/creds.txt");
  const block = enc.encode(`AKIA${"1234567890ABCDEF"}\n`.repeat(100_000));
  for (let i = 0; i < 50; i++) s.push(block);
  const f = s.finish();
  assert.ok(performance.now() - t0 < GUARD_MS);
  assert.equal(f.length, MAX_SECRET_FINDINGS);
  assert.deepEqual(f[99], { kind: "cloudA-access-key", line: 100 });
  assert.equal(s.truncated, "findings");
  // exactly the limit is not truncated; the limit is an option
  const exact = new SecretScanner("a.txt", { maxFindings: 3 });
  exact.push(enc.encode(`AKIA${"1234567890ABCDEF"}\n`.repeat(3)));
  assert.equal(exact.finish().length, 3);
  assert.equal(exact.truncated, null);
});

Deno.test("secrets: a file is scanned up to maxBytes", () => {
  const token = `AKIA${"1234567890ABCDEF"}`;
  const text = "x\n".repeat(1000) + token + "\n";
  const cut = new SecretScanner("a.txt", { maxBytes: 1000 });
  cut.push(enc.encode(text));
  assert.deepEqual(cut.finish(), []);
  assert.equal(cut.truncated, "bytes");
  const whole = new SecretScanner("a.txt", { maxBytes: 2020 });
  for (const c of enc.encode(text)) whole.push(new Uint8Array([c]));
  assert.deepEqual(whole.finish(), [{ kind: "cloudA-access-key", line: 1001 }]);
  assert.equal(whole.truncated, "bytes");
  assert.equal(MAX_SECRET_SCAN_BYTES, 16 << 20);
  // the default budget: 16 MiB of anchored lines without a secret, then a secret
  const t0 = performance.now();
  const s = new SecretScanner("a.txt");
  const block = enc.encode("AKIA\n".repeat(1 << 18));
  for (let i = 0; i < 13; i++) s.push(block);
  s.push(enc.encode(`${token}\n`));
  assert.deepEqual(s.finish(), []);
  assert.equal(s.truncated, "bytes");
  assert.ok(performance.now() - t0 < GUARD_MS, `${performance.now() - t0} ms`);
});

Deno.test("secrets: 64 KiB lines shaped against every rule stay linear", () => {
  const n = 64 * 1024 - 100;
  const cases: [string, string][] = [
    [".npmrc", `_auth=a${" ".repeat(n)}b`],
    [".npmrc", `a:_password=x${" \t".repeat(n / 2)}y`],
    [".npmrc", `${":".repeat(n)}_auth`],
    ["a.txt", `secret_access_key${" ".repeat(n)}#`],
    ["a.txt", `sk_live_${"a".repeat(n)}_`],
    ["a.txt", `ghp_${"a".repeat(n)}_`],
    ["a.txt", `glpat-${"-glpat-".repeat(n / 7)}`],
    ["a.txt", `client-key-data: ${"A".repeat(n)}===`],
    ["x.kubeconfig", `token: ${"a".repeat(n)}#`],
    [".git-credentials", `https://${"a".repeat(n / 2)}:${"b".repeat(n / 2)}`],
    [".git-credentials", `https://a:${":".repeat(n)}`],
    [".netrc", `password${" ".repeat(n)}`],
    ["auth.json", `"auth":"${"A".repeat(n)}`],
    ["a.json", `"private_key": "-----BEGIN ${"A ".repeat(n / 2)}`],
    ["a.pem", `-----BEGIN ${"A ".repeat(n / 2)}`],
    ["a.txt", ` AKIA${"A".repeat(16)}`.repeat(n / 21)],
  ];
  for (const [path, line] of cases) {
    const t0 = performance.now();
    // 16 such lines: a quadratic rule takes seconds per line
    scan(path, `${line}\n`.repeat(16));
    const ms = performance.now() - t0;
    assert.ok(ms < GUARD_MS / 4, `${path} ${line.slice(0, 20)}…: ${ms.toFixed(0)} ms`);
  }
  // the npm rule still reads its value, trimmed
  assert.deepEqual(kinds(".npmrc", `_authToken = ${alnum(30)}   \n`), ["npm-token"]);
});
