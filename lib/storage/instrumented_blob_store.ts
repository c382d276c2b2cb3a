// A BlobStore decorator that reports each operation's latency to a callback, so storage stays
// ignorant of the metrics module (main.ts wires the two).
import type {
  AppendOptions,
  AppendResult,
  BlobStore,
  CommitOptions,
  StoredObject,
} from "./blob_store.ts";

export type ObserveOp = (op: string, seconds: number) => void;

/**
 * Times every operation, successful or not. Stream reads (`read`, `readUpload`) are timed until
 * the stream is open, not until drained (draining runs at the client's pace); `appendUpload`
 * includes receiving the request body, so it tracks client speed as much as the store's;
 * listings are timed to exhaustion.
 */
export class InstrumentedBlobStore implements BlobStore {
  readonly presign?: BlobStore["presign"];
  readonly localScratch?: BlobStore["localScratch"];
  readonly localPath?: BlobStore["localPath"];
  readonly localDerivedPath?: BlobStore["localDerivedPath"];
  readonly adoptDerived?: BlobStore["adoptDerived"];
  constructor(private readonly inner: BlobStore, private readonly observe: ObserveOp) {
    this.localScratch = inner.localScratch?.bind(inner);
    this.localPath = inner.localPath?.bind(inner);
    this.localDerivedPath = inner.localDerivedPath?.bind(inner);
    const adopt = inner.adoptDerived?.bind(inner);
    if (adopt) this.adoptDerived = (n, p) => this.timed("adoptDerived", () => adopt(n, p));
    const presign = inner.presign?.bind(inner);
    if (presign) {
      this.presign = (digest, opts) => this.timed("presign", () => presign(digest, opts));
    }
  }

  private async timed<T>(op: string, p: () => Promise<T>): Promise<T> {
    const t = performance.now();
    try {
      return await p();
    } finally {
      this.observe(op, (performance.now() - t) / 1000);
    }
  }

  read(digest: string, range?: { start: number; end: number }, size?: number) {
    return this.timed("read", () => this.inner.read(digest, range, size));
  }
  readAll(digest: string) {
    return this.timed("readAll", () => this.inner.readAll(digest));
  }
  exists(digest: string) {
    return this.timed("exists", () => this.inner.exists(digest));
  }
  writeDerived(name: string, body: ReadableStream<Uint8Array>) {
    return this.timed("writeDerived", () => this.inner.writeDerived(name, body));
  }

  readDerived(name: string, range?: { start: number; end: number }) {
    return this.timed("readDerived", () => this.inner.readDerived(name, range));
  }

  deleteDerived(prefix: string) {
    return this.timed("deleteDerived", () => this.inner.deleteDerived(prefix));
  }

  put(digest: string, data: Uint8Array) {
    return this.timed("put", () => this.inner.put(digest, data));
  }
  delete(digest: string) {
    return this.timed("delete", () => this.inner.delete(digest));
  }
  appendUpload(
    uuid: string,
    offset: number,
    body: ReadableStream<Uint8Array> | null,
    opts: AppendOptions,
  ): Promise<AppendResult> {
    return this.timed("appendUpload", () => this.inner.appendUpload(uuid, offset, body, opts));
  }
  readUpload(uuid: string, length: number) {
    return this.timed("readUpload", () => this.inner.readUpload(uuid, length));
  }
  openUpload(uuid: string) {
    return this.timed("openUpload", () => this.inner.openUpload(uuid));
  }
  commitUpload(uuid: string, digest: string, size: number, opts?: CommitOptions) {
    return this.timed("commitUpload", () => this.inner.commitUpload(uuid, digest, size, opts));
  }
  deleteUpload(uuid: string) {
    return this.timed("deleteUpload", () => this.inner.deleteUpload(uuid));
  }
  listBlobs(): AsyncIterable<StoredObject> {
    return this.timedList("listBlobs", () => this.inner.listBlobs());
  }
  listUploads(): AsyncIterable<StoredObject> {
    return this.timedList("listUploads", () => this.inner.listUploads());
  }
  quarantine(digest: string) {
    return this.timed("quarantine", () => this.inner.quarantine(digest));
  }
  listQuarantined(): AsyncIterable<StoredObject> {
    return this.timedList("listQuarantined", () => this.inner.listQuarantined());
  }
  deleteQuarantined(digest: string) {
    return this.timed("deleteQuarantined", () => this.inner.deleteQuarantined(digest));
  }

  private async *timedList(
    op: string,
    list: () => AsyncIterable<StoredObject>,
  ): AsyncGenerator<StoredObject> {
    // Only time spent inside the store counts, not the consumer's work between items.
    let spent = 0;
    const it = list()[Symbol.asyncIterator]();
    try {
      for (;;) {
        const t = performance.now();
        const r = await it.next();
        spent += performance.now() - t;
        if (r.done) return;
        yield r.value;
      }
    } finally {
      await it.return?.();
      this.observe(op, spent / 1000);
    }
  }
}
