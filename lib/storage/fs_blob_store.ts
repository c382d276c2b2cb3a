// Content-addressed blobs on a local filesystem: <root>/blobs/<alg>/<hex[0:2]>/<hex>, upload
// sessions as <root>/uploads/<uuid>. A completed upload is renamed into place, so a blob file
// is either absent or whole. Its parts: fs_layout.ts (paths, faults, the reserve, durable
// placing), fs_uploads.ts, fs_derived.ts, fs_quarantine.ts, fs_read.ts (fast reads).
import { join } from "node:path";
import type { StoreWatch } from "./watch.ts";
import type { AppendResult, BlobStore, StoredObject, UploadReader } from "./blob_store.ts";
import { readFileRange } from "./fs_read.ts";
import { dirNames, FsLayout, writeAll } from "./fs_layout.ts";
import { FsUploads } from "./fs_uploads.ts";
import { FsDerived } from "./fs_derived.ts";
import { FsQuarantine } from "./fs_quarantine.ts";

export class FsBlobStore implements BlobStore {
  readonly #fs: FsLayout;
  readonly #uploads: FsUploads;
  readonly #derived: FsDerived;
  readonly #quarantine: FsQuarantine;

  /** how errors and /readyz name this store */
  readonly label: string;

  /**
   * `watch`: refuses new bytes below the free-space reserve and hears of faults (a server's
   * store has one; a scratch store or a test's may not).
   */
  constructor(root: string, watch: StoreWatch | null = null) {
    this.#fs = new FsLayout(root, watch);
    this.label = this.#fs.label;
    this.#uploads = new FsUploads(this.#fs);
    this.#derived = new FsDerived(this.#fs);
    this.#quarantine = new FsQuarantine(this.#fs);
  }

  async init(): Promise<void> {
    await Deno.mkdir(join(this.#fs.root, "uploads"), { recursive: true });
    await Deno.mkdir(join(this.#fs.root, "blobs"), { recursive: true });
    await Deno.mkdir(join(this.#fs.root, "derived"), { recursive: true });
  }

  localScratch(): string {
    return join(this.#fs.root, "sandbox");
  }

  localPath(digest: string): string {
    return this.#fs.blobPath(digest);
  }

  read(
    digest: string,
    range?: { start: number; end: number },
    size?: number,
  ): Promise<ReadableStream<Uint8Array>> {
    return readFileRange(this.#fs.blobPath(digest), range, size);
  }

  readAll(digest: string): Promise<Uint8Array> {
    return Deno.readFile(this.#fs.blobPath(digest));
  }

  async exists(digest: string): Promise<boolean> {
    try {
      await Deno.stat(this.#fs.blobPath(digest));
      return true;
    } catch {
      return false;
    }
  }

  async put(digest: string, data: Uint8Array): Promise<void> {
    try {
      await this.#fs.admit();
    } catch (e) {
      // Bytes already stored are no new bytes (a tag moved to a manifest pushed before).
      const st = await Deno.stat(this.#fs.blobPath(digest)).catch(() => null);
      if (st?.size === data.byteLength) return;
      throw e;
    }
    const tmp = this.#fs.uploadPath(`put-${crypto.randomUUID()}`);
    try {
      const f = await Deno.open(tmp, { write: true, create: true, truncate: true });
      try {
        await writeAll(f, data);
        await f.syncData();
      } finally {
        f.close();
      }
      await this.#fs.place(tmp, this.#fs.blobPath(digest));
    } catch (e) {
      await Deno.remove(tmp).catch(() => {});
      throw this.#fs.fault(e);
    }
    this.#fs.watch?.spent(data.byteLength);
    this.#fs.watch?.blob.ok();
  }

  async delete(digest: string): Promise<void> {
    await Deno.remove(this.#fs.blobPath(digest)).catch((e) => {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    });
  }

  async *listBlobs(): AsyncGenerator<StoredObject> {
    const base = join(this.#fs.root, "blobs");
    for (const alg of await dirNames(base)) {
      for (const prefix of await dirNames(join(base, alg))) {
        for (const hex of await dirNames(join(base, alg, prefix))) {
          const st = await Deno.stat(join(base, alg, prefix, hex)).catch(() => null);
          if (!st?.isFile) continue;
          yield { name: `${alg}:${hex}`, size: st.size, mtime: st.mtime?.getTime() ?? 0 };
        }
      }
    }
  }

  // upload sessions (fs_uploads.ts)
  appendUpload(...a: Parameters<FsUploads["appendUpload"]>): Promise<AppendResult> {
    return this.#uploads.appendUpload(...a);
  }
  readUpload(uuid: string, length: number): Promise<ReadableStream<Uint8Array>> {
    return this.#uploads.readUpload(uuid, length);
  }
  openUpload(uuid: string): Promise<UploadReader> {
    return this.#uploads.openUpload(uuid);
  }
  commitUpload(...a: Parameters<FsUploads["commitUpload"]>): Promise<void> {
    return this.#uploads.commitUpload(...a);
  }
  deleteUpload(uuid: string): Promise<void> {
    return this.#uploads.deleteUpload(uuid);
  }
  listUploads(): AsyncGenerator<StoredObject> {
    return this.#uploads.listUploads();
  }

  // derived files (fs_derived.ts)
  localDerivedPath(name: string): string {
    return this.#derived.localDerivedPath(name);
  }
  adoptDerived(name: string, path: string): Promise<number> {
    return this.#derived.adoptDerived(name, path);
  }
  writeDerived(name: string, body: ReadableStream<Uint8Array>): Promise<number> {
    return this.#derived.writeDerived(name, body);
  }
  readDerived(...a: Parameters<FsDerived["readDerived"]>): Promise<ReadableStream<Uint8Array>> {
    return this.#derived.readDerived(...a);
  }
  deleteDerived(prefix: string): Promise<void> {
    return this.#derived.deleteDerived(prefix);
  }

  // quarantine (fs_quarantine.ts)
  quarantine(digest: string): Promise<boolean> {
    return this.#quarantine.quarantine(digest);
  }
  listQuarantined(): AsyncGenerator<StoredObject> {
    return this.#quarantine.listQuarantined();
  }
  deleteQuarantined(digest: string): Promise<void> {
    return this.#quarantine.deleteQuarantined(digest);
  }
}
