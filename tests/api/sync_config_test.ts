// `[[repository."<name>".sync]]` validation: a tag regex that is invalid or could backtrack
// catastrophically stops startup (exit 2) naming its key, as do the entry's other mistakes;
// the patterns people write for release tags pass.
import assert from "node:assert/strict";
import { join } from "node:path";
import { buildConfig, ConfigError, unsafePattern } from "../../lib/config/mod.ts";
import { parse } from "smol-toml";
import { wharfCommand } from "../helpers/launch.ts";

function toml(sync: string, upstream = true): string {
  return `
[repository."hub"]
${upstream ? '[[repository."hub".upstream]]\nurl = "http://127.0.0.1:9"\n' : ""}
[[repository."hub".sync]]
${sync}
`;
}

function load(text: string) {
  return buildConfig(parse(text) as Record<string, unknown>, ["t.toml"]);
}

Deno.test("sync config: refused regexes and entries name their key", () => {
  const cases: [string, RegExp][] = [
    [`namespaces = ["a/b"]\ntags = ['(a+)+']`, /sync\[0\]\.tags\[0\]: refused regex .*nested/],
    [`namespaces = ["a/b"]\ntags = ['v1', '(\\d|\\d\\d)*$']`, /sync\[0\]\.tags\[1\]: refused/],
    [`namespaces = ["a/b"]\ntags = ['((ab)*c)+']`, /sync\[0\]\.tags\[0\]: refused/],
    [`namespaces = ["a/b"]\ntags = ['(x{2,})+']`, /sync\[0\]\.tags\[0\]: refused/],
    [`namespaces = ["a/b"]\ntags = ['(a?){2,9}']`, /sync\[0\]\.tags\[0\]: refused/],
    [`namespaces = ["a/b"]\ntags = ['(a)\\1']`, /tags\[0\]: refused .*backreferences/],
    [`namespaces = ["a/b"]\ntags = ['(?=a)a']`, /tags\[0\]: refused .*lookaround/],
    [`namespaces = ["a/b"]\ntags = ['[']`, /sync\[0\]\.tags\[0\]: invalid regex/],
    [`namespaces = ["a/b"]\ntags = ['a)']`, /sync\[0\]\.tags\[0\]: refused .*unbalanced/],
    [`namespaces = ["a/b"]\ntags = '3'`, /sync\[0\]\.tags: must be an array of strings/],
    [`tags = ['3']`, /sync\[0\]\.namespaces: is required/],
    [`namespaces = ["Not/Valid"]`, /sync\[0\]\.namespaces\[0\]: "Not\/Valid" is not/],
    [`namespaces = ["a/b"]\nplatforms = ["amd64"]`, /sync\[0\]\.platforms\[0\]/],
    [`namespaces = ["a/b"]\ninterval_secs = 0`, /sync\[0\]\.interval_secs: must be an integer/],
    [`namespaces = ["a/b"]\nmax_tags_per_run = 0`, /sync\[0\]\.max_tags_per_run/],
    [`namespaces = ["a/b"]\nschedule = "daily"`, /sync\[0\]\.schedule: unknown key/],
  ];
  for (const [body, msg] of cases) {
    assert.throws(
      () => load(toml(body)),
      (e) => e instanceof ConfigError && msg.test(e.message),
      body,
    );
  }
  assert.throws(
    () => load(toml(`namespaces = ["a/b"]`, false)),
    /repository\."hub"\.sync: only applies to a repository with upstreams/,
  );
});

Deno.test("sync config: release-tag patterns pass and match in full", () => {
  for (
    const p of [
      "3\\.\\d+",
      "v?\\d+\\.\\d+\\.\\d+(-alpine)?",
      "[0-9]+\\.[0-9]+",
      "latest|stable",
      "(3|4)\\.\\d+",
      "1\\.2[0-9]-[a-z]+",
      "(?:alpine|slim)-\\d+",
      "[)(+*]+",
      "\\(a+\\)+",
    ]
  ) assert.equal(unsafePattern(p), null, p);
  const cfg = load(
    toml(`namespaces = ["library/alpine"]\ntags = ['3\\.\\d+']\nplatforms = ["linux/arm64/v8"]`),
  );
  const s = cfg.repositories.get("hub")!.syncs![0];
  assert.ok(s.tags[0].test("3.19"));
  assert.ok(!s.tags[0].test("3.19-rc"), "full match");
  assert.deepEqual(s.platforms, ["linux/arm64/v8"]);
  assert.equal(s.intervalSecs, 3600);
  assert.equal(s.includeReferrers, true);
  assert.equal(s.prune, false);
});

Deno.test("sync config: `main.ts serve` with a catastrophic regex exits 2 naming the key", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wharf-sync-cfg-" });
  try {
    const file = join(dir, "wharf.toml");
    await Deno.writeTextFile(
      file,
      `[server]\nport = 0\n[metadata_store]\npath = "${join(dir, "m.kv")}"\n` +
        toml(`namespaces = ["library/alpine"]\ntags = ['(\\d+)*x']`),
    );
    const out = await wharfCommand(["serve", "-c", file], {
      env: { NO_COLOR: "1", RUST_BACKTRACE: "0" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const err = new TextDecoder().decode(out.stderr);
    assert.equal(out.code, 2, err);
    assert.match(err, /repository\."hub"\.sync\[0\]\.tags\[0\]: refused regex "\(\\\\d\+\)\*x"/);
    const sync = await wharfCommand(["sync", "-c", file], {
      env: { NO_COLOR: "1", RUST_BACKTRACE: "0" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(sync.code, 2);
    assert.match(new TextDecoder().decode(sync.stderr), /sync\[0\]\.tags\[0\]: refused regex/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
