// What each secret kind matches, in plain words, is one table (lib/index/secret_kinds.ts): the
// scanner's kinds are exactly its rows, the UI's copy (ui/src/secret_kinds.ts; the bundle cannot
// import lib/) and docs/scanning.md's table say the same, and the CSV writes it beside each kind.
import assert from "node:assert/strict";
import {
  describeSecretKind,
  SECRET_KIND_NAMES,
  SECRET_KINDS,
  SecretScanner,
} from "../lib/index/mod.ts";
import { reportCsv } from "../lib/scan/mod.ts";
import { SECRET_KINDS as UI_SECRET_KINDS } from "../ui/src/secret_kinds.ts";

Deno.test("secret kinds: the table has one row per kind the scanner reports, in its order", () => {
  assert.deepEqual(SECRET_KINDS.map((k) => k.kind), [...SECRET_KIND_NAMES]);
  for (const k of SECRET_KINDS) {
    assert.ok(k.name.length > 0 && k.matches.length > 0, k.kind);
    assert.notEqual(k.name, k.kind, `${k.kind}: named by its placeholder`);
  }
  assert.equal(
    describeSecretKind("cloudA-access-key"),
    "cloud access key id — a token starting AKIA or ASIA, mixing letters and digits",
  );
  assert.equal(describeSecretKind("no-such-kind"), null);
});

Deno.test("secret kinds: the UI's copy is the table", () => {
  assert.deepEqual(UI_SECRET_KINDS, SECRET_KINDS);
});

Deno.test("secret kinds: docs/scanning.md's table is the table", async () => {
  const doc = await Deno.readTextFile(new URL("../docs/scanning.md", import.meta.url));
  const section = doc.slice(doc.indexOf("## Secret kinds"));
  const rows = [...section.matchAll(/^\| `([\w-]+)`\s*\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|$/gm)]
    .map((m) => ({ kind: m[1], name: m[2], matches: m[3].replaceAll("`", "") }));
  assert.deepEqual(rows, SECRET_KINDS.map((k) => ({ ...k })));
});

Deno.test("secret kinds: a scanned finding's kind is described", () => {
  const s = new SecretScanner("app/config.env");
  s.push(new TextEncoder().encode("aws_key=AKIAZ7Q3MN4PLK2XW9RT\n"));
  const [finding] = s.finish();
  assert.equal(finding.kind, "cloudA-access-key");
  assert.match(describeSecretKind(finding.kind)!, /^cloud access key id — /);
});

Deno.test("secret kinds: the CSV lists the config's credentials with what each matches", () => {
  const csv = reportCsv({
    findings: [],
    advisories: { snapshot: "s1", loaded_at: "2024-06-01T00:00:00Z", records: 10 },
    vulnerabilities_checked: true,
    config_secrets: [
      { source: "env", index: 1, name: "AWS_SECRET_ACCESS_KEY", kind: "cloudA-credentials" },
      { source: "history", index: 0, kind: "netrc" },
      { source: "env", index: 2, name: "X", kind: "a-kind-from-a-newer-scanner" },
    ],
  });
  assert.deepEqual(csv.split("\r\n"), [
    "id,severity,package,installed,fixed,aliases,summary",
    "SECRET,UNKNOWN,,,,,cloudA-credentials (cloud secret access key — a secret access key line set to a 40-character key) in environment variable AWS_SECRET_ACCESS_KEY",
    "SECRET,UNKNOWN,,,,,netrc (netrc password — a password in a .netrc (or _netrc) file) in history line 1",
    "SECRET,UNKNOWN,,,,,a-kind-from-a-newer-scanner in environment variable X",
    "",
  ]);
});
