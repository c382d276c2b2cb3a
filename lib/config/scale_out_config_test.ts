// [blob_store.s3], [metadata_store] url, the redirect switches and an optional token realm.
import assert from "node:assert/strict";
import { parse } from "smol-toml";
import { buildConfig, ConfigError } from "./mod.ts";

const build = (toml: string) => buildConfig(parse(toml) as Record<string, unknown>, ["t.toml"]);

const AWS_VARS = [
  "AWS_ACCESS_KEY_ID",
  "AWS_SECRET_ACCESS_KEY",
  "AWS_SESSION_TOKEN",
  "AWS_REGION",
  "AWS_DEFAULT_REGION",
  "AWS_ENDPOINT_URL",
  "AWS_ENDPOINT_URL_S3",
];

function withEnv(vars: Record<string, string>, fn: () => void): void {
  const saved = new Map(AWS_VARS.map((k) => [k, Deno.env.get(k)]));
  for (const k of AWS_VARS) Deno.env.delete(k);
  for (const [k, v] of Object.entries(vars)) Deno.env.set(k, v);
  try {
    fn();
  } finally {
    for (const [k, v] of saved) v === undefined ? Deno.env.delete(k) : Deno.env.set(k, v);
  }
}

Deno.test("[blob_store.s3]: every key read, defaults for the optional ones", () => {
  withEnv({}, () => {
    const c = build(`[blob_store.s3]
endpoint = "http://127.0.0.1:9000"
bucket = "b"
region = "eu-west-3"
access_key_id = "AK"
secret_key = "SK"
key_prefix = "wharf/prod"
multipart_part_size = 10485760
presign_ttl_secs = 60
path_style = true
`);
    assert.deepEqual(c.blobStore.s3, {
      endpoint: "http://127.0.0.1:9000",
      bucket: "b",
      region: "eu-west-3",
      accessKeyId: "AK",
      secretKey: "SK",
      sessionToken: null,
      keyPrefix: "wharf/prod",
      multipartPartSize: 10485760,
      presignTtlSecs: 60,
      pathStyle: true,
    });
    const d = build(`[blob_store.s3]\nbucket = "b"\naccess_key_id = "AK"\nsecret_key = "SK"\n`);
    assert.equal(d.blobStore.s3!.endpoint, "https://s3.us-east-1.amazonaws.com");
    assert.equal(d.blobStore.s3!.multipartPartSize, 8 << 20);
    assert.equal(d.blobStore.s3!.presignTtlSecs, 900);
    assert.equal(d.blobStore.s3!.pathStyle, false);
    assert.equal(d.blobStore.s3!.keyPrefix, "");
    assert.equal(build("").blobStore.s3, null);
  });
});

Deno.test("[blob_store.s3]: credentials, region and endpoint from the AWS_* environment", () => {
  withEnv({
    AWS_ACCESS_KEY_ID: "envAK",
    AWS_SECRET_ACCESS_KEY: "envSK",
    AWS_SESSION_TOKEN: "tok",
    AWS_REGION: "ap-south-1",
    AWS_ENDPOINT_URL_S3: "http://minio.local:9000",
  }, () => {
    const s3 = build(`[blob_store.s3]\nbucket = "b"\n`).blobStore.s3!;
    assert.equal(s3.accessKeyId, "envAK");
    assert.equal(s3.secretKey, "envSK");
    assert.equal(s3.sessionToken, "tok");
    assert.equal(s3.region, "ap-south-1");
    assert.equal(s3.endpoint, "http://minio.local:9000");
    // The file wins over the environment.
    const f = build(`[blob_store.s3]\nbucket = "b"\naccess_key_id = "fileAK"\n`).blobStore.s3!;
    assert.equal(f.accessKeyId, "fileAK");
  });
});

Deno.test("[blob_store.s3]: bad values fail startup with the key named", () => {
  withEnv({}, () => {
    const base = `bucket = "b"\naccess_key_id = "AK"\nsecret_key = "SK"\n`;
    const cases: [string, RegExp][] = [
      [`[blob_store.s3]\naccess_key_id = "AK"\nsecret_key = "SK"\n`, /blob_store\.s3\.bucket/],
      [`[blob_store.s3]\nbucket = "b"\n`, /access_key_id and secret_key/],
      [`[blob_store.s3]\n${base}multipart_part_size = 1048576\n`, /multipart_part_size/],
      [`[blob_store.s3]\n${base}endpoint = "ftp://x"\n`, /blob_store\.s3\.endpoint/],
      [`[blob_store.s3]\n${base}key_prefix = "../x"\n`, /key_prefix/],
      [`[blob_store.s3]\n${base}presign_ttl_secs = 0\n`, /presign_ttl_secs/],
      [`[blob_store.s3]\n${base}colour = "red"\n`, /colour/],
      [`[blob_store.fs]\nroot_dir = "/x"\n[blob_store.s3]\n${base}`, /one of/],
    ];
    for (const [toml, re] of cases) {
      assert.throws(() => build(toml), (e) => e instanceof ConfigError && re.test(e.message), toml);
    }
  });
});

Deno.test("[metadata_store] url opens a remote KV instead of path", () => {
  const c = build(`[metadata_store]\nurl = "https://api.deno.com/databases/x/connect"\n`);
  assert.equal(c.metadataStore.url, "https://api.deno.com/databases/x/connect");
  assert.equal(build("").metadataStore.url, null);
  assert.throws(() => build(`[metadata_store]\nurl = "file:///x"\n`), /metadata_store\.url/);
  assert.throws(
    () => build(`[metadata_store]\nurl = "https://h/x"\npath = "a.kv"\n`),
    /set one of path and url/,
  );
});

Deno.test("global.enable_blob_redirect / enable_manifest_redirect default on", () => {
  const d = build("");
  assert.equal(d.global.enableBlobRedirect, true);
  assert.equal(d.global.enableManifestRedirect, true);
  const off = build(`[global]\nenable_blob_redirect = false\nenable_manifest_redirect = false\n`);
  assert.equal(off.global.enableBlobRedirect, false);
  assert.equal(off.global.enableManifestRedirect, false);
});

Deno.test("auth.token_service.realm is optional (derived per request); service defaults", () => {
  const secret = `secret_key = "${"s".repeat(32)}"`;
  const c = build(`[auth.token_service]\n${secret}\n`);
  assert.equal(c.auth.tokenService!.realm, null);
  assert.equal(c.auth.tokenService!.service, "wharf");
  const r = build(`[auth.token_service]\n${secret}\nrealm = "https://r.example/token"\n`);
  assert.equal(r.auth.tokenService!.service, "r.example");
  assert.throws(() => build(`[auth.token_service]\n${secret}\nrealm = "nope"\n`), /realm/);
});
