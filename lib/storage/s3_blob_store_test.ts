import { blobStoreContract } from "../../tests/helpers/blob_store_contract.ts";
import { startS3, type TestS3 } from "../../tests/helpers/s3_server.ts";
import { MIN_PART_SIZE, S3BlobStore } from "./s3_blob_store.ts";

let s3: TestS3 | null = null;
let users = 0;

blobStoreContract("s3", async () => {
  users++;
  s3 ??= await startS3();
  const store = new S3BlobStore({
    endpoint: s3.endpoint,
    bucket: s3.bucket,
    region: "us-east-1",
    accessKeyId: s3.accessKeyId,
    secretKey: s3.secretKey,
    pathStyle: true,
    // every test gets its own prefix: an empty store on the one server
    keyPrefix: `t-${crypto.randomUUID()}`,
    partSize: MIN_PART_SIZE,
    presignTtlSecs: 60,
  });
  await store.init();
  return {
    store,
    partSize: MIN_PART_SIZE,
    cleanup: async () => {
      if (--users === 0 && s3) {
        await s3.close();
        s3 = null;
      }
    },
  };
}, { sanitize: false });
