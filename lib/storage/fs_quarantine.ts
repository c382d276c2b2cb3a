// Quarantined blobs (<root>/quarantine/<alg>/<hex>): bytes that did not match their digest,
// moved out of serving and kept for an operator.
import { dirname, join } from "node:path";
import type { StoredObject } from "./blob_store.ts";
import { dirNames, type FsLayout, syncDir } from "./fs_layout.ts";

/** The store's quarantine. */
export class FsQuarantine {
  constructor(private readonly fs: FsLayout) {}

  private quarantinePath(digest: string): string {
    const [alg, hex] = digest.split(":");
    return join(this.fs.root, "quarantine", alg, hex);
  }

  /** A rename out of `blobs/` (same filesystem): the bytes stay for an operator to look at. */
  async quarantine(digest: string): Promise<boolean> {
    const src = this.fs.blobPath(digest);
    const dst = this.quarantinePath(digest);
    await Deno.stat(src); // NotFound before any directory is made
    await Deno.mkdir(dirname(dst), { recursive: true });
    await Deno.rename(src, dst);
    // The blob's absence must outlive a power loss like its presence does (`place`).
    await syncDir(dirname(src));
    return true;
  }

  async *listQuarantined(): AsyncGenerator<StoredObject> {
    const base = join(this.fs.root, "quarantine");
    for (const alg of await dirNames(base)) {
      for (const hex of await dirNames(join(base, alg))) {
        const st = await Deno.stat(join(base, alg, hex)).catch(() => null);
        if (!st?.isFile) continue;
        yield { name: `${alg}:${hex}`, size: st.size, mtime: st.mtime?.getTime() ?? 0 };
      }
    }
  }

  async deleteQuarantined(digest: string): Promise<void> {
    await Deno.remove(this.quarantinePath(digest)).catch((e) => {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    });
  }
}
