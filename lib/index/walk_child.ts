// The index walk in a sandbox process (docs/design.md, "Untrusted content"): started by
// LayerIndex.run with read access to the layer's file (or the layer on its standard input),
// write access to one scratch folder and FFI for zlib and libzstd. It writes the run's
// derived files into the scratch folder, which the parent moves into the store once the walk
// ended well, and prints the run's record. As a worker of the serving process (`sandbox =
// "worker"`) it opens the store itself and writes the run's slot directly.
import { childArgs, childInput, childMain } from "../sandbox/mod.ts";
import type { BlobStoreConfig, Config, IndexConfig } from "../config/mod.ts";
import { FsBlobStore, openBlobStore, readFileRange } from "../storage/mod.ts";
import { type NativeLibrary, setLibraryPaths } from "./native_libs.ts";
import { walkLayer, type WalkStore } from "./indexer.ts";

export interface WalkArgs {
  limits: IndexConfig;
  digest: string;
  size: number;
  base: string;
  /** the layer's file; absent: the layer comes on standard input */
  blobPath?: string;
  /** where derived files go (a process sandbox) */
  scratch?: string;
  /** a worker's store instead: it reads the layer and writes the slot itself */
  blobStore?: BlobStoreConfig;
  libs: Partial<Record<NativeLibrary, string>>;
}

/**
 * The layer on standard input, read once: the head the walk asks for first is kept, and the
 * whole-layer read then starts with it.
 */
class StdinLayer {
  private head = new Uint8Array(0);
  private readonly reader = childInput().getReader();
  private taken = false;

  async range(start: number, end: number): Promise<ReadableStream<Uint8Array>> {
    while (this.head.length <= end) {
      const { value, done } = await this.reader.read();
      if (done) break;
      const both = new Uint8Array(this.head.length + value.length);
      both.set(this.head);
      both.set(value, this.head.length);
      this.head = both;
    }
    return ReadableStream.from([this.head.slice(start, end + 1)]);
  }

  whole(): ReadableStream<Uint8Array> {
    if (this.taken) throw new Error("the layer on standard input was read twice");
    this.taken = true;
    const first = this.head;
    const reader = this.reader;
    let sentHead = first.length === 0;
    return new ReadableStream<Uint8Array>({
      async pull(c) {
        if (!sentHead) {
          sentHead = true;
          return c.enqueue(first);
        }
        const { value, done } = await reader.read();
        if (done) return c.close();
        c.enqueue(value);
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    });
  }
}

/**
 * The layer from its file or standard input; derived files into an FsBlobStore rooted at the
 * scratch folder (written whole and synced, as the real store's: the parent renames them in).
 */
class ScratchStore implements WalkStore {
  private readonly stdin: StdinLayer | null;
  private readonly scratch: FsBlobStore;

  constructor(private readonly a: WalkArgs) {
    this.stdin = a.blobPath ? null : new StdinLayer();
    this.scratch = new FsBlobStore(a.scratch!);
  }

  init(): Promise<void> {
    return this.scratch.init();
  }

  read(_digest: string, range?: { start: number; end: number }) {
    if (this.stdin) {
      return Promise.resolve(
        range ? this.stdin.range(range.start, range.end) : this.stdin.whole(),
      );
    }
    return readFileRange(this.a.blobPath!, range);
  }

  writeDerived(name: string, body: ReadableStream<Uint8Array>): Promise<number> {
    return this.scratch.writeDerived(name, body);
  }

  deleteDerived(prefix: string): Promise<void> {
    return this.scratch.deleteDerived(prefix);
  }
}

/** The parse: run by childMain in a process, a worker, or through main.ts's sandbox entry. */
export async function main(): Promise<unknown> {
  const a = childArgs<WalkArgs>();
  setLibraryPaths(a.libs);
  let store: WalkStore;
  if (a.blobStore) store = await openBlobStore({ blobStore: a.blobStore } as Config);
  else {
    const scratch = new ScratchStore(a);
    await scratch.init();
    store = scratch;
  }
  const r = await walkLayer({
    limits: a.limits,
    store,
    digest: a.digest,
    size: a.size,
    base: a.base,
    rereadable: a.blobStore !== undefined || a.blobPath !== undefined,
  });
  return {
    record: r.record,
    error: r.error,
    budget: r.budget
      ? { budget: r.budget.budget, limit: r.budget.limit, reached: r.budget.reached }
      : undefined,
  };
}

if (import.meta.main) await childMain(main);
