// `[blob_store] min_free_bytes` (issue 38): the free-space reserve under which new uploads are
// refused.
import assert from "node:assert/strict";
import { parse } from "smol-toml";
import { buildConfig, ConfigError } from "./mod.ts";

const build = (toml: string) => buildConfig(parse(toml), ["t.toml"]);

Deno.test("[blob_store] min_free_bytes: unset is the default (null), 0 turns it off, with fs or s3", () => {
  assert.equal(build("").blobStore.minFreeBytes, null);
  assert.equal(build("[blob_store]\nmin_free_bytes = 0\n").blobStore.minFreeBytes, 0);
  const fs = build(`[blob_store]\nmin_free_bytes = 1073741824\n[blob_store.fs]\nroot_dir = "/d"\n`);
  assert.equal(fs.blobStore.minFreeBytes, 1 << 30);
  assert.equal(fs.blobStore.fs.rootDir, "/d");
  const s3 = build(
    `[blob_store]\nmin_free_bytes = 5\n[blob_store.s3]\nbucket = "b"\naccess_key_id = "a"\nsecret_key = "s"\n`,
  );
  assert.equal(s3.blobStore.minFreeBytes, 5);
  assert.equal(s3.blobStore.s3?.bucket, "b");
});

Deno.test("[blob_store] min_free_bytes: a negative or non-integer value stops startup naming it", () => {
  for (const v of ["-1", "1.5", '"1G"']) {
    assert.throws(
      () => build(`[blob_store]\nmin_free_bytes = ${v}\n`),
      (e: Error) => e instanceof ConfigError && e.message.includes("blob_store.min_free_bytes"),
      v,
    );
  }
});
