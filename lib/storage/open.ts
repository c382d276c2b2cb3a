// Opens the blob store the config names: [blob_store.s3] when present, else [blob_store.fs].
import type { Config } from "../config/mod.ts";
import type { BlobStore } from "./blob_store.ts";
import { FsBlobStore } from "./fs_blob_store.ts";
import { S3BlobStore } from "./s3_blob_store.ts";
import { s3OpenError } from "./s3_open_error.ts";

export async function openBlobStore(cfg: Config): Promise<BlobStore> {
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
    });
    try {
      await store.init();
    } catch (e) {
      throw await s3OpenError(s3, e);
    }
    return store;
  }
  const store = new FsBlobStore(cfg.blobStore.fs.rootDir);
  await store.init();
  return store;
}

/** Where the blob store lives, for startup lines. */
export function describeBlobStore(cfg: Config): string {
  const s3 = cfg.blobStore.s3;
  if (!s3) return cfg.blobStore.fs.rootDir;
  return `s3 ${s3.endpoint} bucket ${s3.bucket}${s3.keyPrefix ? ` prefix ${s3.keyPrefix}` : ""}`;
}
