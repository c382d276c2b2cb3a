// The index walk in a sandbox process (docs/design.md, "Untrusted content"): started by
// LayerIndex.run with read access to the layer's file (or the layer on its standard input),
// write access to one scratch folder and FFI for zlib and libzstd. It writes the run's
// derived files into the scratch folder, which the parent moves into the store once the walk
// ended well, and prints the run's record. As a worker of the serving process (`sandbox =
// "worker"`) it opens the store itself and writes the run's slot directly.
import { childArgs, childInput, childMain } from "../sandbox/mod.ts";
import type { BlobStoreConfig, Config, IndexConfig } from "../config/mod.ts";
import { openBlobStore } from "../storage/mod.ts";
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

const READ = 1024 * 1024;

/** [start, end] of a file, read in 1 MiB pieces. */
function fileRange(path: string, start: number, end: number): ReadableStream<Uint8Array> {
  let f: Deno.FsFile | null = null;
  let pos = start;
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      if (!f) {
        f = await Deno.open(path, { read: true });
        await f.seek(start, Deno.SeekMode.Start);
      }
      if (pos > end) {
        f.close();
        return c.close();
      }
      const buf = new Uint8Array(Math.min(READ, end - pos + 1));
      const n = await f.read(buf);
      if (n === null) {
        f.close();
        return c.close();
      }
      pos += n;
      c.enqueue(buf.subarray(0, n));
    },
    cancel() {
      f?.close();
    },
  });
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

class ScratchStore implements WalkStore {
  private readonly stdin: StdinLayer | null;

  constructor(private readonly a: WalkArgs) {
    this.stdin = a.blobPath ? null : new StdinLayer();
  }

  read(_digest: string, range?: { start: number; end: number }) {
    const start = range?.start ?? 0;
    const end = range?.end ?? this.a.size - 1;
    if (this.stdin) {
      return Promise.resolve(range ? this.stdin.range(start, end) : this.stdin.whole());
    }
    return Promise.resolve(fileRange(this.a.blobPath!, start, end));
  }

  async writeDerived(name: string, body: ReadableStream<Uint8Array>): Promise<number> {
    const path = `${this.a.scratch!}/${name}`;
    await Deno.mkdir(path.slice(0, path.lastIndexOf("/")), { recursive: true });
    const f = await Deno.open(path, { write: true, create: true, truncate: true });
    let n = 0;
    try {
      for await (const chunk of body) {
        for (let at = 0; at < chunk.length;) at += await f.write(chunk.subarray(at));
        n += chunk.length;
      }
      // The parent renames these into the store, which promises durable derived files.
      await f.syncData();
    } finally {
      f.close();
    }
    return n;
  }

  async deleteDerived(prefix: string): Promise<void> {
    await Deno.remove(`${this.a.scratch!}/${prefix}`, { recursive: true }).catch(() => {});
  }
}

if (import.meta.main) {
  await childMain(async () => {
    const a = childArgs<WalkArgs>();
    setLibraryPaths(a.libs);
    const store = a.blobStore
      ? await openBlobStore({ blobStore: a.blobStore } as Config)
      : new ScratchStore(a);
    const r = await walkLayer(
      a.limits,
      store,
      a.digest,
      a.size,
      a.base,
      undefined,
      undefined,
      a.blobStore !== undefined || a.blobPath !== undefined,
    );
    return {
      record: r.record,
      error: r.error,
      budget: r.budget
        ? { budget: r.budget.budget, limit: r.budget.limit, reached: r.budget.reached }
        : undefined,
    };
  });
}
