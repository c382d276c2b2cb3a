import assert from "node:assert/strict";
import { buildConfig, ConfigError, loadConfigFiles, repositoryOf, resolveNsParam } from "./mod.ts";

Deno.test("defaults apply without a config file", () => {
  const c = buildConfig({}, []);
  assert.equal(c.server.bindAddress, "0.0.0.0");
  assert.equal(c.server.port, 5000);
  assert.equal(c.global.maxBlobSize, null);
  assert.equal(c.global.maxManifestSize, 4 * 1024 * 1024);
  assert.equal(c.global.allowMissingManifestReferences, true);
  assert.equal(c.global.accessPolicyDefault, "allow");
});

Deno.test("later files win key by key", async () => {
  const dir = await Deno.makeTempDir();
  await Deno.writeTextFile(
    `${dir}/a.toml`,
    `[server]\nport = 1234\nbind_address = "127.0.0.1"\n[global]\nimmutable_tags = true\n`,
  );
  await Deno.writeTextFile(
    `${dir}/b.toml`,
    `[server]\nport = 4321\n[repository."hub"]\nnamespace = "docker.io"\nimmutable_tags_exclusions = ["latest"]\n`,
  );
  const c = await loadConfigFiles([`${dir}/a.toml`, `${dir}/b.toml`]);
  assert.equal(c.server.port, 4321);
  assert.equal(c.server.bindAddress, "127.0.0.1");
  assert.equal(c.global.immutableTags, true);
  const hub = c.repositories.get("hub")!;
  assert.equal(hub.namespace, "docker.io");
  assert.ok(hub.immutableTagsExclusions![0].test("latest"));
  assert.ok(!hub.immutableTagsExclusions![0].test("latest-rc"), "exclusions are full-match");
  await Deno.remove(dir, { recursive: true });
});

Deno.test("invalid config names the key and the file", async () => {
  const dir = await Deno.makeTempDir();
  const bad: [string, RegExp][] = [
    [`[server]\nport = "x"\n`, /bad\.toml: server\.port: must be an integer/],
    [`[global]\nmax_blob_size = -1\n`, /global\.max_blob_size/],
    [
      `[global]\nimmutable_tags_exclusions = ["("]\n`,
      /global\.immutable_tags_exclusions\[0\]: invalid regex/,
    ],
    [`[globl]\n`, /globl: unknown key/],
    [`[repository."Bad Name"]\n`, /repository\."Bad Name": not a valid repository name/],
    [`[global.access_policy]\ndefault = "maybe"\n`, /global\.access_policy\.default/],
    [`[server\n`, /bad\.toml: invalid TOML/],
  ];
  for (const [text, re] of bad) {
    await Deno.writeTextFile(`${dir}/bad.toml`, text);
    await assert.rejects(
      loadConfigFiles([`${dir}/bad.toml`]),
      (e) => e instanceof ConfigError && re.test(e.message),
      text,
    );
  }
  await assert.rejects(loadConfigFiles([`${dir}/missing.toml`]), /missing\.toml: cannot read/);
  await Deno.remove(dir, { recursive: true });
});

Deno.test("a namespace belongs to the longest configured repository prefix, else its first segment", () => {
  const c = buildConfig({ repository: { "a": {}, "a/b": { namespace: "docker.io" } } }, []);
  assert.equal(repositoryOf(c, "a/b/c").name, "a/b");
  assert.equal(repositoryOf(c, "a/bc").name, "a");
  assert.equal(repositoryOf(c, "x/y").name, "x");
  assert.equal(resolveNsParam(c, "docker.io", "library/alpine"), "a/b/library/alpine");
  assert.equal(resolveNsParam(c, "docker.io", "a/b/x"), "a/b/x");
  assert.equal(resolveNsParam(c, "quay.io", "x"), null);
  assert.equal(resolveNsParam(c, null, "x"), null);
});
