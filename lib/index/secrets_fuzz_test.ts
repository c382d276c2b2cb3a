// Property fuzzing of the secret scanner: every text file of every layer goes through it.
import assert from "node:assert/strict";
import { SecretScanner } from "./secrets.ts";
import { FAST_MS, fc, fuzzParams, mutatedText, withinSync } from "../../tests/helpers/fuzz.ts";

const enc = new TextEncoder();

function scan(path: string, bytes: Uint8Array, cuts: number[] = []) {
  const s = new SecretScanner(path);
  let prev = 0;
  for (const c of [...cuts.map((x) => Math.floor(x * bytes.length))].sort((a, b) => a - b)) {
    s.push(bytes.subarray(prev, Math.max(prev, c)));
    prev = Math.max(prev, c);
  }
  s.push(bytes.subarray(prev));
  return s.finish();
}

const SAMPLE = [
  "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzzzzzzzzzz",
  "AKIAIOSFODNN7ABCD123",
  "token: ghp_" + "a1".repeat(18),
  "glpat-" + "x9".repeat(10),
  "-----BEGIN RSA PRIVATE KEY-----",
  "MIIEowIBAAKCAQEA" + "b".repeat(48),
  "-----END RSA PRIVATE KEY-----",
  '{"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEv"}',
  "//registry.npmjs.org/:_authToken=npm_abc123def456",
  "machine h login u password s3cr3t",
  "https://user:pa55@example.com",
  "client-key-data: TUlJRXZRSUJBREFOQmdrcWhraUc5dzBCQVFFRkFBU0NCS2N3Z2dTakFnRUFBb0lCQVFDMw==",
  "",
].join("\n");

const PATHS = [
  "app/config",
  "root/.npmrc",
  "root/.netrc",
  "root/.git-credentials",
  "root/.docker/config.json",
  "root/.kube/config",
];

function bounded(text: Uint8Array, found: { kind: string; line: number }[]): void {
  const lines = text.reduce((n, b) => n + (b === 0x0a ? 1 : 0), 1);
  for (const f of found) assert.ok(f.line >= 1 && f.line <= lines, `line ${f.line} of ${lines}`);
  for (let i = 1; i < found.length; i++) assert.ok(found[i].line >= found[i - 1].line);
  // one finding per kind and line
  assert.ok(found.length <= lines * 12);
}

Deno.test("fuzz secrets: findings do not depend on how the bytes are chunked", () => {
  fc.assert(
    fc.property(
      fc.constantFrom(...PATHS),
      mutatedText(SAMPLE, 6),
      fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 10 }),
      (path, text, cuts) => {
        const bytes = enc.encode(text);
        const whole = scan(path, bytes);
        bounded(bytes, whole);
        assert.deepEqual(scan(path, bytes, cuts), whole);
      },
    ),
    fuzzParams(),
  );
});

Deno.test("fuzz secrets: random text and paths never throw, fast", () => {
  fc.assert(
    fc.property(
      fc.string({ maxLength: 120 }),
      fc.array(fc.oneof(fc.string({ maxLength: 200 }), fc.constantFrom(...SAMPLE.split("\n"))), {
        maxLength: 40,
      }),
      (path, lines) => {
        const bytes = enc.encode(lines.join("\n"));
        bounded(bytes, withinSync(FAST_MS, "scan", () => scan(path, bytes)));
      },
    ),
    fuzzParams(),
  );
});

Deno.test("fuzz secrets: long lines of near-tokens stay linear", () => {
  // one 64 KiB line and many short ones, each made of token prefixes the rules anchor on
  for (const unit of ["ghp_a1", "AKIA1", "xoxb-1", "=", "_authToken=", "https://a:"]) {
    const long = enc.encode(unit.repeat(Math.ceil(70_000 / unit.length)));
    withinSync(FAST_MS, `64 KiB line of ${unit}`, () => scan("root/.npmrc", long));
    const many = enc.encode((unit + "\n").repeat(Math.ceil(1_000_000 / (unit.length + 1))));
    withinSync(FAST_MS * 2, `1 MB of ${unit} lines`, () => scan("root/.npmrc", many));
  }
});
