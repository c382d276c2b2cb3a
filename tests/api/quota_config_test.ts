// Issue 26 "Bad input": quota and cache-cap config with wrong types, negative values or unknown
// keys stops startup naming the key; a pull-through repository under a quota refuses fills
// past it (403 DENIED, the upstream's bytes never stored).
import assert from "node:assert/strict";
import { join } from "node:path";
import { parse } from "smol-toml";
import { buildConfig, ConfigError } from "../../lib/config/mod.ts";
import { FakeRegistry } from "../helpers/fake_registry.ts";
import { req, serverTestOpts } from "../helpers/api.ts";
import { withServer } from "../helpers/server.ts";
import { wharfCommand } from "../helpers/launch.ts";
import { descOf, imageManifest, jsonBytes, OCI_CONFIG, OCI_LAYER } from "../helpers/oci_content.ts";
import { OCI_MANIFEST, unique } from "../helpers/oci_content.ts";

const UP = `[[repository."hub".upstream]]\nurl = "http://127.0.0.1:9"\n`;

const BAD: [string, string][] = [
  [`[global.quota]\ndefault_max_bytes = -1\n`, "global.quota.default_max_bytes"],
  [`[global.quota]\ndefault_max_bytes = "10GiB"\n`, "global.quota.default_max_bytes"],
  [`[global.quota]\ndefault_max_bytes = 1.5\n`, "global.quota.default_max_bytes"],
  [`[global.quota]\nmax_bytes = 10\n`, "global.quota.max_bytes"],
  [`[global]\nquota = 5\n`, "global.quota"],
  [`[[global.quota.namespace]]\npattern = "ci-.*"\n`, "global.quota.namespace[0].max_bytes"],
  [
    `[[global.quota.namespace]]\npattern = "("\nmax_bytes = 1\n`,
    "global.quota.namespace[0].pattern",
  ],
  [
    `[[global.quota.namespace]]\npattern = "a"\nmax_bytes = 1\nlimit = 2\n`,
    "global.quota.namespace[0].limit",
  ],
  [`[repository."team".quota]\nmax_bytes = -5\n`, `repository."team".quota.max_bytes`],
  [`[repository."team".quota]\nmax_byte = 5\n`, `repository."team".quota.max_byte`],
  [`[repository."team".quota]\n`, `repository."team".quota.max_bytes`],
  [`[repository."team"]\nquota = true\n`, `repository."team".quota`],
  [`[repository."team"]\nmax_cache_bytes = 100\n`, `repository."team".max_cache_bytes`],
  [`[repository."hub"]\nmax_cache_bytes = -1\n${UP}`, `repository."hub".max_cache_bytes`],
  [`[repository."hub"]\nmax_cache_bytes = "1G"\n${UP}`, `repository."hub".max_cache_bytes`],
];

Deno.test("quota config: every bad value or key is refused naming it", () => {
  for (const [toml, key] of BAD) {
    assert.throws(
      () => buildConfig(parse(toml) as Record<string, unknown>, ["q.toml"]),
      (e: unknown) => e instanceof ConfigError && e.message.includes(`${key}:`),
      `${key} in:\n${toml}`,
    );
  }
  const ok = buildConfig(
    parse(`[global.quota]\ndefault_max_bytes = 0\n[repository."hub"]\nmax_cache_bytes = 0\n${UP}`),
    ["q.toml"],
  );
  assert.equal(ok.global.quota.defaultMaxBytes, 0);
  assert.equal(ok.repositories.get("hub")!.maxCacheBytes, 0);
});

Deno.test("quota config: the server does not start on a bad quota, naming the key", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const path = join(dir, "bad.toml");
    await Deno.writeTextFile(
      path,
      `[metadata_store]\npath = "${dir}/kv"\n[repository."team".quota]\nmax_bytes = -1\n`,
    );
    const out = await wharfCommand(["serve", "-c", path], {
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stderr) + new TextDecoder().decode(out.stdout);
    assert.notEqual(out.code, 0);
    assert.match(text, /repository\."team"\.quota\.max_bytes: must be a whole number of bytes/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test(
  "quota on a pull-through repository: a fill past it is 403, nothing stored",
  serverTestOpts,
  async () => {
    const up = await FakeRegistry.start();
    try {
      const cfg = jsonBytes({ architecture: "amd64", os: "linux" });
      const layer = unique("big layer ".repeat(2000));
      up.addBlob("library/x", cfg);
      up.addBlob("library/x", layer);
      const layerDesc = await descOf(OCI_LAYER, layer);
      const manifest = imageManifest(await descOf(OCI_CONFIG, cfg), [layerDesc]);
      up.addManifest("library/x", manifest, { tags: ["latest"] });
      const config = `
[repository."hub".quota]
max_bytes = ${manifest.length + cfg.length + 100}

[[repository."hub".upstream]]
url = "${up.url}"
`;
      await withServer({ config }, async (s) => {
        const m = await req(s, "/v2/hub/library/x/manifests/latest", {
          headers: { Accept: OCI_MANIFEST },
        });
        await m.body?.cancel();
        assert.equal(m.status, 200);
        const r = await req(s, `/v2/hub/library/x/blobs/${layerDesc.digest}`);
        assert.equal(r.status, 403);
        const e = (await r.json()).errors[0];
        assert.equal(e.code, "DENIED");
        assert.match(
          e.detail,
          /^quota exceeded: hub uses \d+ B of \d+ B; this push needs 20 KiB more$/,
        );
        const list = await (await req(s, "/v2/_svc/repositories/list")).json();
        assert.equal(list.repositories[0].used_bytes, manifest.length);
      });
    } finally {
      await up.close();
    }
  },
);
