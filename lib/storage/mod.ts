// Blob bytes only (metadata lives in lib/metadata): the BlobStore interface, its filesystem and
// S3 implementations, an instrumented decorator, and openBlobStore for the configured one.
export type {
  AppendOptions,
  AppendResult,
  BlobStore,
  CommitOptions,
  StoredObject,
  UploadReader,
} from "./blob_store.ts";
export { ConcurrentUploadError, TooLargeError } from "./blob_store.ts";
export { FsBlobStore } from "./fs_blob_store.ts";
export { limitStream, readFileRange } from "./fs_read.ts";
export {
  InstrumentedBlobStore,
  type ObserveOp as ObserveBlobStoreOp,
} from "./instrumented_blob_store.ts";
export { MIN_PART_SIZE, S3BlobStore, type S3StoreSettings } from "./s3_blob_store.ts";
export { S3Client, type S3Settings } from "./s3_client.ts";
export { describeBlobStore, openBlobStore, watchStores } from "./open.ts";
export { type StoreFigures, type StoreName, StoreWatch } from "./watch.ts";
export { type FaultReport, formatBytes, RETRY_AFTER_SECS } from "./faults.ts";
export { storeErrorAnswer } from "./fault_answer.ts";
export {
  CorruptBlobError,
  countIntegrityFailure,
  countQuarantined,
  integrityFailureCounts,
  type IntegrityObject,
  mismatch,
  quarantinedCounts,
  readVerified,
  verifiedBytes,
} from "./integrity.ts";
export { BlobStoreOpenError } from "./s3_open_error.ts";
