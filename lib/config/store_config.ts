// `[blob_store]` (a directory or an S3 bucket for the bytes) and `[metadata_store]` (the KV).
import type { Config, S3StoreConfig } from "./schema.ts";
import { isUrl, type Reader } from "./config_reader.ts";
import type { Table } from "./table_readers.ts";

/** `[blob_store]`: `[blob_store.fs]` or `[blob_store.s3]`, and the free-space reserve. */
export function readBlobStore(r: Reader, bs: Table, cfg: Config): void {
  r.only(bs, "blob_store", ["fs", "s3", "min_free_bytes"]);
  cfg.blobStore.minFreeBytes = r.int(bs, "min_free_bytes", "blob_store", 0) ?? null;
  const fs = r.table(bs.fs, "blob_store.fs");
  r.only(fs, "blob_store.fs", ["root_dir"]);
  cfg.blobStore.fs.rootDir = r.str(fs, "root_dir", "blob_store.fs") ?? cfg.blobStore.fs.rootDir;
  if (bs.s3 !== undefined) {
    if (bs.fs !== undefined) r.fail("blob_store", "set one of [blob_store.fs] and [blob_store.s3]");
    cfg.blobStore.s3 = readS3(r, r.table(bs.s3, "blob_store.s3"));
  }
}

/** `[metadata_store]`: a KV file's path or a KV Connect URL. */
export function readMetadataStore(r: Reader, md: Table, cfg: Config): void {
  r.only(md, "metadata_store", ["path", "url"]);
  cfg.metadataStore.path = r.str(md, "path", "metadata_store") ?? cfg.metadataStore.path;
  cfg.metadataStore.url = r.str(md, "url", "metadata_store") ?? null;
  if (cfg.metadataStore.url !== null) {
    if (md.path !== undefined) r.fail("metadata_store", "set one of path and url");
    if (!isUrl(cfg.metadataStore.url)) {
      r.fail("metadata_store.url", "must be an http(s) KV Connect URL");
    }
  }
}

/** `[blob_store.s3]`; credentials, region and endpoint may come from the AWS_* environment. */
function readS3(r: Reader, t: Table): S3StoreConfig {
  const p = "blob_store.s3";
  r.only(t, p, [
    "endpoint",
    "bucket",
    "region",
    "access_key_id",
    "secret_key",
    "key_prefix",
    "multipart_part_size",
    "presign_ttl_secs",
    "path_style",
  ]);
  const env = (k: string): string | null => {
    try {
      return Deno.env.get(k) || null;
    } catch {
      return null; // no --allow-env: the config must say it all
    }
  };
  const region = r.str(t, "region", p) ?? env("AWS_REGION") ?? env("AWS_DEFAULT_REGION") ??
    "us-east-1";
  const endpoint = r.str(t, "endpoint", p) ?? env("AWS_ENDPOINT_URL_S3") ??
    env("AWS_ENDPOINT_URL") ?? `https://s3.${region}.amazonaws.com`;
  if (!isUrl(endpoint)) r.fail(`${p}.endpoint`, "must be an http(s) URL");
  const bucket = r.str(t, "bucket", p);
  if (!bucket) r.fail(`${p}.bucket`, "is required");
  const accessKeyId = r.str(t, "access_key_id", p) ?? env("AWS_ACCESS_KEY_ID");
  const secretKey = r.str(t, "secret_key", p) ?? env("AWS_SECRET_ACCESS_KEY");
  if (!accessKeyId || !secretKey) {
    r.fail(p, "needs access_key_id and secret_key (or AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY)");
  }
  const keyPrefix = r.str(t, "key_prefix", p) ?? "";
  if (
    keyPrefix !== "" &&
    (!/^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*\/?$/.test(keyPrefix) ||
      keyPrefix.split("/").some((seg) => seg === "." || seg === ".."))
  ) {
    r.fail(`${p}.key_prefix`, "must be path segments of [A-Za-z0-9._-]");
  }
  return {
    endpoint,
    bucket,
    region,
    accessKeyId,
    secretKey,
    sessionToken: env("AWS_SESSION_TOKEN"),
    keyPrefix,
    // S3 refuses parts under 5 MiB (but the last) and allows at most 10,000 parts.
    multipartPartSize: r.int(t, "multipart_part_size", p, 5 << 20, 5 << 30) ?? 8 << 20,
    presignTtlSecs: r.int(t, "presign_ttl_secs", p, 1, 7 * 86400) ?? 900,
    pathStyle: r.bool(t, "path_style", p) ?? false,
  };
}
