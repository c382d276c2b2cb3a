// Blob bytes only. Metadata (who owns what, sizes) lives in KV; a store only answers for bytes.

export interface CommitOptions {
  /**
   * The upload holds exactly `size` bytes, all durable: the last appendUpload, with no writer
   * since, wrote bytes and ended at `size` (an append truncates to its start offset first and
   * syncs what it wrote, as every earlier one did). A store may then skip truncating and syncing
   * the file again (the fs store: 4 file operations fewer per blob).
   */
  synced?: boolean;
}

export interface AppendOptions {
  maxBytes: number;
  onChunk: (c: Uint8Array) => void;
  /**
   * The body has no declared length (chunked transfer encoding). Deno's BYOB reads of such a
   * request body stall per chunk (a 256 MiB PATCH took 29 s against 0.4 s with a length and
   * 1.5 s with the default reader, measured here), so those bodies take the default reader.
   */
  unsized?: boolean;
}

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

/**
 * An upload session's stored bytes are not the ones this process hashed: another process wrote
 * the same part meanwhile (two writers on one session). Completing would store bytes that do
 * not hash to the digest, so the session cannot go on.
 */
export class ConcurrentUploadError extends Error {}

const DERIVED_NAME = /^[a-z0-9][a-z0-9._-]*(\/[a-z0-9][a-z0-9._-]*)*$/;

/** Derived names are paths under the store's root: nothing else may get there. */
export function assertDerivedName(name: string): void {
  if (!DERIVED_NAME.test(name) || name.split("/").some((s) => s === "." || s === "..")) {
    throw new Error(`invalid derived file name ${JSON.stringify(name.slice(0, 200))}`);
  }
}

/** Reads an upload's bytes while another writer may still append to it. */
export interface UploadReader {
  /** Reads into `buf` from `position`; 0 at the bytes written so far. */
  readAt(position: number, buf: Uint8Array): Promise<number>;
  close(): void;
}

export interface BlobStore {
  /**
   * Streams [start, end] (inclusive) or the whole blob. A chunk's memory may be reused once a
   * few later chunks have been read: a consumer that keeps chunks must copy them. `size`, when
   * the caller knows it from the metadata, spares a store that would otherwise ask for it (the
   * fs store's stat: one file operation fewer per blob GET); the stream still ends where the
   * bytes do.
   */
  read(
    digest: string,
    range?: { start: number; end: number },
    size?: number,
  ): Promise<ReadableStream<Uint8Array>>;
  readAll(digest: string): Promise<Uint8Array>;
  exists(digest: string): Promise<boolean>;
  put(digest: string, data: Uint8Array): Promise<void>;
  delete(digest: string): Promise<void>;

  /** Writes `body` at `offset` of upload `uuid` (truncating anything past offset first),
   * calling `onChunk` for each chunk written. Stops with TooLargeError past `maxBytes`.
   * A store is done with a chunk of `body` once it asks for the next one (it copies what it
   * must keep): callers may refill that chunk's memory then (the pull-through fill does). */
  appendUpload(
    uuid: string,
    offset: number,
    body: ReadableStream<Uint8Array> | null,
    opts: AppendOptions,
  ): Promise<AppendResult>;
  readUpload(uuid: string, length: number): Promise<ReadableStream<Uint8Array>>;
  /**
   * Opens an upload for reading as it grows (pull-through followers tail a fill this way). The
   * reader keeps working after commitUpload moves the bytes to their blob: it holds the bytes,
   * not the name. NotFound once the upload is gone.
   */
  openUpload(uuid: string): Promise<UploadReader>;
  /** moves the first `size` bytes of the upload into the blob `digest` */
  commitUpload(uuid: string, digest: string, size: number, opts?: CommitOptions): Promise<void>;
  deleteUpload(uuid: string): Promise<void>;

  /**
   * Files derived from blobs (a layer's index: listing, checkpoints, a seekable side copy),
   * named by relative paths of `[a-z0-9._-]` segments. Written whole and atomically (a reader
   * sees the old file or the new one); returns the size written.
   */
  writeDerived(name: string, body: ReadableStream<Uint8Array>): Promise<number>;
  /** Streams [start, end] (inclusive) or all of a derived file; NotFound when absent. */
  readDerived(
    name: string,
    range?: { start: number; end: number },
  ): Promise<ReadableStream<Uint8Array>>;
  /** Deletes every derived file under `prefix/` (and `prefix` itself). */
  deleteDerived(prefix: string): Promise<void>;

  /** Every stored blob (for scrub's sweep), in no particular order. */
  listBlobs(): AsyncIterable<StoredObject>;
  /** Every upload file, including temporaries of interrupted writes. */
  listUploads(): AsyncIterable<StoredObject>;

  /**
   * Takes a blob whose bytes failed verification out of serving (lib/registry/quarantine.ts):
   * afterwards `read`, `exists` and `listBlobs` no longer see it, and a later placement of the
   * digest (a re-push, a refetch) stores afresh instead of finding it present. The bytes are kept
   * aside for an operator (`listQuarantined`) where that is cheap; returns whether they were.
   * NotFound when the blob is absent.
   */
  quarantine(digest: string): Promise<boolean>;
  /** The copies `quarantine` kept (name: the digest). */
  listQuarantined(): AsyncIterable<StoredObject>;
  /** Drops a quarantined copy (absent: no error). */
  deleteQuarantined(digest: string): Promise<void>;

  /**
   * A time-limited URL a client may GET the blob from directly (SPEC §Blobs, Redirects), with
   * `contentType` as the answer's Content-Type; absent when the store has no such URLs.
   */
  presign?(digest: string, opts?: { contentType?: string }): Promise<string>;

  /**
   * A place on local disk for a sandboxed parse to write into, from which `adoptDerived` moves
   * files cheaply (the fs store's own disk, so a move is a rename); absent: a temp folder.
   */
  localScratch?(): string;
  /** The blob's file on local disk, which a sandbox may be allowed to read; absent: streamed. */
  localPath?(digest: string): string;
  /** The derived file's path on local disk, which a sandbox may be allowed to read. */
  localDerivedPath?(name: string): string;
  /** Makes the local file `path` the derived file `name` (moved, not copied, where it can be). */
  adoptDerived?(name: string, path: string): Promise<number>;
}
