// Blob bytes only. Metadata (who owns what, sizes) lives in KV; a store only answers for bytes.

export interface AppendResult {
  /** bytes taken from the body and written */
  written: number;
  /** the body ended early (connection cut before its declared length or EOF) */
  cut: boolean;
}

/** A stored object as scrub sees it: enough to judge age without reading bytes. */
export interface StoredObject {
  /** a blob digest, or an upload file's name (a session uuid or a temporary name) */
  name: string;
  size: number;
  /** ms since epoch of the last write */
  mtime: number;
}

export class TooLargeError extends Error {}

/** Reads an upload's bytes while another writer may still append to it. */
export interface UploadReader {
  /** Reads into `buf` from `position`; 0 at the bytes written so far. */
  readAt(position: number, buf: Uint8Array): Promise<number>;
  close(): void;
}

export interface BlobStore {
  /**
   * Streams [start, end] (inclusive) or the whole blob. A chunk's memory may be reused once a
   * few later chunks have been read: a consumer that keeps chunks must copy them.
   */
  read(digest: string, range?: { start: number; end: number }): Promise<ReadableStream<Uint8Array>>;
  readAll(digest: string): Promise<Uint8Array>;
  exists(digest: string): Promise<boolean>;
  put(digest: string, data: Uint8Array): Promise<void>;
  delete(digest: string): Promise<void>;

  /** Writes `body` at `offset` of upload `uuid` (truncating anything past offset first),
   * calling `onChunk` for each chunk written. Stops with TooLargeError past `maxBytes`. */
  appendUpload(
    uuid: string,
    offset: number,
    body: ReadableStream<Uint8Array> | null,
    opts: { maxBytes: number; onChunk: (c: Uint8Array) => void },
  ): Promise<AppendResult>;
  readUpload(uuid: string, length: number): Promise<ReadableStream<Uint8Array>>;
  /**
   * Opens an upload for reading as it grows (pull-through followers tail a fill this way). The
   * reader keeps working after commitUpload moves the bytes to their blob: it holds the bytes,
   * not the name. NotFound once the upload is gone.
   */
  openUpload(uuid: string): Promise<UploadReader>;
  /** moves the first `size` bytes of the upload into the blob `digest` */
  commitUpload(uuid: string, digest: string, size: number): Promise<void>;
  deleteUpload(uuid: string): Promise<void>;

  /** Every stored blob (for scrub's sweep), in no particular order. */
  listBlobs(): AsyncIterable<StoredObject>;
  /** Every upload file, including temporaries of interrupted writes. */
  listUploads(): AsyncIterable<StoredObject>;
}
