export type { AppendOptions, AppendResult, BlobStore, UploadReader } from "./blob_store.ts";
export { TooLargeError } from "./blob_store.ts";
export { FsBlobStore, limitStream } from "./fs_blob_store.ts";
export {
  InstrumentedBlobStore,
  type ObserveOp as ObserveBlobStoreOp,
} from "./instrumented_blob_store.ts";
