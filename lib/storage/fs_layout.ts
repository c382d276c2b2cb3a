// Where a filesystem blob store keeps things (blobs/, uploads/ under its root) and how its writes
// end: a failing filesystem reported as the store's fault, new bytes refused below the reserve,
// a blob placed durably (renamed, its directories synced).
import { dirname, join } from "node:path";
import { osFault, storeFault } from "./faults.ts";
import type { StoreWatch } from "./watch.ts";

/** Blob directories remembered as durable: 256 prefixes per algorithm, with room to spare. */
const DURABLE_DIRS_MAX = 4096;

/** The root, its paths, and the write rules every part of the store shares. */
export class FsLayout {
  /**
   * Blob directories whose own entry this process has synced into their parent: placing a blob
   * there needs neither a mkdir nor a second directory sync (one fsync less per blob).
   */
  private readonly durableDirs = new Set<string>();

  /** how errors and /readyz name this store */
  readonly label: string;

  constructor(readonly root: string, readonly watch: StoreWatch | null = null) {
    this.label = `the blob store (${root})`;
  }

  /**
   * A write's error as the client should see it: a full or failing filesystem becomes 503 with
   * its cause (and is reported to the watch); anything else is passed on as it is.
   */
  fault(e: unknown): unknown {
    const f = osFault(e);
    if (!f) return e;
    this.watch?.blob.fault(f.kind, `${this.label} is ${f.kind} (${f.why})`);
    return storeFault(f.kind, this.label, f.why);
  }

  /** Refuses new bytes below the reserve (the body, if any, is cancelled: it will not be read). */
  async admit(body?: ReadableStream<Uint8Array> | null): Promise<void> {
    try {
      await this.watch?.admit();
    } catch (e) {
      await body?.cancel().catch(() => {});
      throw e;
    }
  }

  blobPath(digest: string): string {
    const [alg, hex] = digest.split(":");
    return join(this.root, "blobs", alg, hex.slice(0, 2), hex);
  }
  uploadPath(uuid: string): string {
    return join(this.root, "uploads", uuid);
  }

  /**
   * Renames a synced file to its blob path and syncs the directories involved, so a blob the
   * metadata commit that follows calls present is still there after a power loss.
   */
  async place(src: string, dst: string): Promise<void> {
    const dir = dirname(dst);
    if (this.durableDirs.has(dir)) {
      try {
        await Deno.rename(src, dst);
        await syncDir(dir);
        return;
      } catch (e) {
        // Removed since (by hand, or another tool): made again below.
        if (!(e instanceof Deno.errors.NotFound)) throw e;
        this.durableDirs.delete(dir);
      }
    }
    await Deno.mkdir(dir, { recursive: true });
    await Deno.rename(src, dst);
    await syncDir(dir);
    // `dir` may have just been created, here or by another process that has not synced its
    // parent yet: this process syncs the parent once, then knows the entry is durable.
    await syncDir(dirname(dir));
    if (this.durableDirs.size < DURABLE_DIRS_MAX) this.durableDirs.add(dir);
  }
}

export async function syncDir(path: string): Promise<void> {
  const d = await Deno.open(path, { read: true });
  try {
    await d.sync();
  } finally {
    d.close();
  }
}

/** Entry names of a directory (empty when it does not exist): read whole so the walk never
 * holds a directory handle across awaits of the caller. */
export async function dirNames(dir: string): Promise<string[]> {
  const out: string[] = [];
  try {
    for await (const e of Deno.readDir(dir)) out.push(e.name);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  return out;
}

export async function writeAll(f: Deno.FsFile, data: Uint8Array): Promise<void> {
  let off = 0;
  while (off < data.byteLength) off += await f.write(data.subarray(off));
}
