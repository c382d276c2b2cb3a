// Upload sessions on the filesystem (<root>/uploads/<uuid>): appended durably at committed
// offsets, read back while they grow, renamed into place whole when completed.
import { join } from "node:path";
import {
  type AppendOptions,
  type AppendResult,
  type CommitOptions,
  type StoredObject,
  TooLargeError,
  type UploadReader,
} from "./blob_store.ts";
import { bodyChunks } from "./body_chunks.ts";
import { limitStream } from "./fs_read.ts";
import { dirNames, type FsLayout, writeAll } from "./fs_layout.ts";

/** The store's upload sessions. */
export class FsUploads {
  constructor(private readonly fs: FsLayout) {}

  async appendUpload(
    uuid: string,
    offset: number,
    body: ReadableStream<Uint8Array> | null,
    opts: AppendOptions,
  ): Promise<AppendResult> {
    if (body) await this.fs.admit(body);
    const path = this.fs.uploadPath(uuid);
    let f: Deno.FsFile | null = null;
    let written = 0;
    try {
      // At offset 0 the open truncates: two file operations fewer for every single-request blob.
      f = await Deno.open(path, { write: true, create: true, truncate: offset === 0 });
      const r = await appendTo(f, offset, body, opts, (n) => (written += n));
      // The caller acknowledges the new offset (a KV commit) once this returns: the bytes must
      // outlive a power loss first, or a resumed upload's persisted hash state would vouch for
      // bytes the file no longer holds. docker-registry syncs at the same points.
      if (written > 0) await f.syncData();
      this.fs.watch?.spent(written);
      this.fs.watch?.blob.ok();
      return r;
    } catch (e) {
      if (e instanceof TooLargeError) {
        // What fit stays, as durable as any append's bytes (the caller ends the session).
        if (written > 0) await f!.syncData().catch(() => {});
        throw e;
      }
      // Nothing of a failed append is acknowledged: its bytes go at once (on a full disk they
      // are the room the next writes need), leaving the session at its committed offset.
      if (f) await dropPast(f, path, offset);
      throw this.fs.fault(e);
    } finally {
      f?.close();
    }
  }

  async readUpload(uuid: string, length: number): Promise<ReadableStream<Uint8Array>> {
    const f = await Deno.open(this.fs.uploadPath(uuid), { read: true, create: false });
    return limitStream(f.readable, length);
  }

  async openUpload(uuid: string): Promise<UploadReader> {
    // An open descriptor survives the rename of commitUpload (same inode).
    const f = await Deno.open(this.fs.uploadPath(uuid), { read: true });
    let closed = false;
    return {
      async readAt(position: number, buf: Uint8Array): Promise<number> {
        await f.seek(position, Deno.SeekMode.Start);
        return (await f.read(buf)) ?? 0;
      },
      close() {
        if (!closed) f.close();
        closed = true;
      },
    };
  }

  async commitUpload(
    uuid: string,
    digest: string,
    size: number,
    opts?: CommitOptions,
  ): Promise<void> {
    const src = this.fs.uploadPath(uuid);
    try {
      if (!opts?.synced) {
        const f = await Deno.open(src, { write: true });
        try {
          await f.truncate(size);
          await f.syncData();
        } finally {
          f.close();
        }
      }
      await this.fs.place(src, this.fs.blobPath(digest));
    } catch (e) {
      throw this.fs.fault(e);
    }
  }

  async deleteUpload(uuid: string): Promise<void> {
    await Deno.remove(this.fs.uploadPath(uuid)).catch(() => {});
  }

  async *listUploads(): AsyncGenerator<StoredObject> {
    const base = join(this.fs.root, "uploads");
    for (const name of await dirNames(base)) {
      const st = await Deno.stat(join(base, name)).catch(() => null);
      if (!st?.isFile) continue;
      yield { name, size: st.size, mtime: st.mtime?.getTime() ?? 0 };
    }
  }
}

/**
 * Writes `body` at `offset` of the open upload file (truncating anything past `offset` first),
 * reporting each chunk's size to `wrote` as it lands; does not sync.
 */
async function appendTo(
  f: Deno.FsFile,
  offset: number,
  body: ReadableStream<Uint8Array> | null,
  opts: AppendOptions,
  wrote: (n: number) => void,
): Promise<AppendResult> {
  if (offset > 0) {
    // Bytes past the committed offset were never acknowledged (a crash mid-PATCH): drop them.
    await f.truncate(offset);
    await f.seek(offset, Deno.SeekMode.Start);
  }
  if (!body) return { written: 0, cut: false };
  let written = 0;
  const chunks = bodyChunks(body, opts.unsized === true);
  try {
    for (;;) {
      let r: IteratorResult<Uint8Array>;
      try {
        r = await chunks.next();
      } catch {
        return { written, cut: true };
      }
      if (r.done) return { written, cut: false };
      const chunk = r.value;
      if (written + chunk.byteLength > opts.maxBytes) {
        // Keep what fits so a window check (416) can still see a complete prefix.
        const room = opts.maxBytes - written;
        if (room > 0) {
          await writeAll(f, chunk.subarray(0, room));
          opts.onChunk(chunk.subarray(0, room));
          written += room;
          wrote(room);
        }
        throw new TooLargeError(`more than ${opts.maxBytes} bytes`);
      }
      await writeAll(f, chunk);
      opts.onChunk(chunk);
      written += chunk.byteLength;
      wrote(chunk.byteLength);
    }
  } finally {
    await chunks.return(undefined).catch(() => {});
  }
}

/** Removes what a failed append wrote: the file back to `offset`, or gone when that is 0. */
async function dropPast(f: Deno.FsFile, path: string, offset: number): Promise<void> {
  try {
    if (offset > 0) await f.truncate(offset);
    else await Deno.remove(path);
  } catch {
    // the next append truncates to its offset first; scrub removes a file left alone
  }
}
