// Derived files (<root>/derived/<name>: the layer index's tables, reports): written whole to a
// temporary file and renamed, so a reader sees the old file or the new one.
import { dirname, join } from "node:path";
import { assertDerivedName } from "./blob_store.ts";
import { limitStream } from "./fs_read.ts";
import { type FsLayout, writeAll } from "./fs_layout.ts";

/** The store's derived files. */
export class FsDerived {
  constructor(private readonly fs: FsLayout) {}

  localDerivedPath(name: string): string {
    return this.derivedPath(name);
  }

  async adoptDerived(name: string, path: string): Promise<number> {
    const dst = this.derivedPath(name);
    await Deno.mkdir(dirname(dst), { recursive: true });
    try {
      await Deno.rename(path, dst);
      return (await Deno.stat(dst)).size;
    } catch {
      // Another filesystem (a scratch folder elsewhere): copied, as any stream is.
      const f = await Deno.open(path, { read: true });
      return await this.writeDerived(name, f.readable);
    }
  }

  private derivedPath(name: string): string {
    assertDerivedName(name);
    return join(this.fs.root, "derived", ...name.split("/"));
  }

  async writeDerived(name: string, body: ReadableStream<Uint8Array>): Promise<number> {
    const dst = this.derivedPath(name);
    await this.fs.admit(body);
    const tmp = this.fs.uploadPath(`derived-${crypto.randomUUID()}`);
    let n = 0;
    try {
      const f = await Deno.open(tmp, { write: true, create: true, truncate: true });
      try {
        for await (const chunk of body) {
          await writeAll(f, chunk);
          n += chunk.byteLength;
        }
        await f.syncData();
      } finally {
        f.close();
      }
      await Deno.mkdir(dirname(dst), { recursive: true });
      await Deno.rename(tmp, dst);
    } catch (e) {
      await Deno.remove(tmp).catch(() => {});
      throw this.fs.fault(e);
    }
    this.fs.watch?.spent(n);
    return n;
  }

  async readDerived(
    name: string,
    range?: { start: number; end: number },
  ): Promise<ReadableStream<Uint8Array>> {
    const f = await Deno.open(this.derivedPath(name), { read: true });
    try {
      if (!range) return f.readable;
      await f.seek(range.start, Deno.SeekMode.Start);
    } catch (e) {
      f.close();
      throw e;
    }
    return limitStream(f.readable, range.end - range.start + 1);
  }

  async deleteDerived(prefix: string): Promise<void> {
    await Deno.remove(this.derivedPath(prefix), { recursive: true }).catch((e) => {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    });
  }
}
