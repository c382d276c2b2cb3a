// Property and mutation fuzzing of the TOML config loader: a bad file must fail startup with a
// ConfigError naming the key, never with a stray TypeError.
import assert from "node:assert/strict";
import { buildConfig, loadConfigFiles } from "./load.ts";
import { ConfigError } from "./config_reader.ts";
import {
  expectOnly,
  FAST_MS,
  fc,
  fuzzParams,
  mutatedText,
  within,
  withinSync,
} from "../../tests/helpers/fuzz.ts";

const SAMPLE = `
[server]
bind_address = "127.0.0.1"
port = 5000

[blob_store.fs]
root_dir = "./data/blobs"

[metadata_store]
path = "./data/metadata.kv"

[global]
max_blob_size = 10737418240
max_manifest_size = 4194304
immutable_tags = false
immutable_tags_exclusions = ["latest", "v[0-9]+"]

[global.access_policy]
default = "allow"

[repository."hub"]
namespace = "docker.io"
immutable_tags_exclusions = ["latest"]
`;

const KEYS = [
  "server",
  "global",
  "repository",
  "blob_store",
  "metadata_store",
  "auth",
  "upstream",
  "index",
  "scan",
  "port",
  "bind_address",
  "max_blob_size",
  "immutable_tags",
  "namespace",
  "access_policy",
  "default",
  "rules",
  "job_queue",
  "concurrency",
  "fs",
  "root_dir",
  "__proto__",
  "constructor",
];

/** TOML-like documents: known keys with values of any type, nested a few levels. */
const doc: fc.Arbitrary<Record<string, unknown>> = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: "small" },
    fc.string({ maxLength: 20 }),
    fc.integer(),
    fc.bigInt({ min: -(2n ** 64n), max: 2n ** 64n }),
    fc.double(),
    fc.boolean(),
    fc.date({ noInvalidDate: true }),
    fc.array(fc.oneof(fc.string({ maxLength: 10 }), fc.integer()), { maxLength: 3 }),
    tie("table"),
  ),
  table: fc.dictionary(
    fc.oneof(fc.constantFrom(...KEYS), fc.string({ maxLength: 8 })),
    tie("value"),
    {
      maxKeys: 5,
    },
  ),
})).table as fc.Arbitrary<Record<string, unknown>>;

function build(d: Record<string, unknown>): void {
  try {
    withinSync(FAST_MS, "buildConfig", () => buildConfig(d, ["fuzz.toml"]));
  } catch (e) {
    expectOnly(e, ConfigError);
  }
}

Deno.test("fuzz config: any document builds or fails with ConfigError", () => {
  fc.assert(fc.property(doc, build), fuzzParams());
});

Deno.test("fuzz config: valid tables under known sections build or fail with ConfigError", () => {
  fc.assert(
    fc.property(
      fc.constantFrom("server", "global", "blob_store", "metadata_store", "auth", "scan", "index"),
      doc,
      (section, table) => build({ [section]: table }),
    ),
    fuzzParams(),
  );
});

Deno.test("fuzz config: mutated TOML files load or fail with ConfigError", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wharf-config-fuzz-" });
  try {
    await loadConfigFiles([]);
    await Deno.writeTextFile(`${dir}/ok.toml`, SAMPLE);
    const ok = await loadConfigFiles([`${dir}/ok.toml`]);
    assert.equal(ok.server.port, 5000);
    await fc.assert(
      fc.asyncProperty(mutatedText(SAMPLE, 6), async (text) => {
        await Deno.writeTextFile(`${dir}/c.toml`, text);
        await within(FAST_MS, "loadConfigFiles", async () => {
          try {
            await loadConfigFiles([`${dir}/ok.toml`, `${dir}/c.toml`]);
          } catch (e) {
            expectOnly(e, ConfigError);
          }
        });
      }),
      fuzzParams(0.5),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** A `[__proto__]` table must be refused as an unknown key, not become the document's prototype. */
const PROTO_TABLE = "[__proto__]\nserver = { port = 1 }\n";

Deno.test("fuzz config: a [__proto__] table is an unknown key", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wharf-config-fuzz-" });
  try {
    await Deno.writeTextFile(`${dir}/a.toml`, "");
    await Deno.writeTextFile(`${dir}/p.toml`, PROTO_TABLE);
    await assert.rejects(
      () => loadConfigFiles([`${dir}/a.toml`, `${dir}/p.toml`]),
      (e) => e instanceof ConfigError && /__proto__: unknown key/.test(e.message),
    );
    assert.equal(Object.prototype.hasOwnProperty.call(Object.prototype, "server"), false);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
