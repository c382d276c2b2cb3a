// Opens the blob store the config names: [blob_store.s3] when present, else [blob_store.fs]; and
// the watch over it and the KV file's filesystem (free space, faults) that a server keeps.
import { dirname } from "node:path";
import type { Config } from "../config/mod.ts";
import type { BlobStore } from "./blob_store.ts";
import { FsBlobStore } from "./fs_blob_store.ts";
import { S3BlobStore } from "./s3_blob_store.ts";
import { s3OpenError } from "./s3_open_error.ts";
import { StoreWatch } from "./watch.ts";

/**
 * `watch` (watchStores): the store refuses new bytes below the free-space reserve and reports
 * its faults there; without one (a sandboxed walk's read-only store) it does neither.
 */
export async function openBlobStore(
  cfg: Config,
  watch: StoreWatch | null = null,
): Promise<BlobStore> {
  const s3 = cfg.blobStore.s3;
  if (s3) {
    const store = new S3BlobStore({
      endpoint: s3.endpoint,
      bucket: s3.bucket,
      region: s3.region,
      accessKeyId: s3.accessKeyId,
      secretKey: s3.secretKey,
      sessionToken: s3.sessionToken ?? undefined,
      pathStyle: s3.pathStyle,
      keyPrefix: s3.keyPrefix,
      partSize: s3.multipartPartSize,
      presignTtlSecs: s3.presignTtlSecs,
    }, watch);
    try {
      await store.init();
    } catch (e) {
      throw await s3OpenError(s3, e);
    }
    return store;
  }
  const store = new FsBlobStore(cfg.blobStore.fs.rootDir, watch);
  await store.init();
  return store;
}

/** The watch over the configured stores: the blob store and a local KV file's filesystem. */
export function watchStores(cfg: Config): StoreWatch {
  const s3 = cfg.blobStore.s3;
  const kv = cfg.metadataStore.url ?? cfg.metadataStore.path;
  const local = !/^https?:\/\//.test(kv);
  return new StoreWatch({
    blob: s3
      ? { label: `the blob store (S3 ${s3.endpoint} bucket ${s3.bucket})`, dir: null }
      : { label: `the blob store (${cfg.blobStore.fs.rootDir})`, dir: cfg.blobStore.fs.rootDir },
    metadata: { label: `the metadata store (${kv})`, dir: local ? dirname(kv) : null },
    minFreeBytes: cfg.blobStore.minFreeBytes ?? null,
  });
}

/** Where the blob store lives, for startup lines. */
export function describeBlobStore(cfg: Config): string {
  const s3 = cfg.blobStore.s3;
  if (!s3) return cfg.blobStore.fs.rootDir;
  return `s3 ${s3.endpoint} bucket ${s3.bucket}${s3.keyPrefix ? ` prefix ${s3.keyPrefix}` : ""}`;
}
