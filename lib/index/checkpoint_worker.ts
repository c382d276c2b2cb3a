// Runs the gzip checkpoint pass off the main thread, so it overlaps the main pass (tar walk,
// hashing) on another core: native zlib through FFI where permitted, else pako. With `zstd`
// (native only) it decompresses a zstd layer instead (libzstd), and makes no checkpoints.
// Messages in: `{init: {inflate, credits, zstd}}` first; then `{buffer, length}` per compressed chunk, each
// buffer given back with `{ack, buffer}` once used up (the sender's flow control and buffer
// pool); `{credit}` (inflate mode) when the sender took an output chunk; `{stop}` to end early;
// null after the last chunk. Out: `{checkpoint, window}` as checkpoints are made; with
// `inflate` (native only) the uncompressed stream as `{output, length}` 256 KiB buffers, at
// most `credits` not yet taken, so a fast inflate never runs ahead of the walk (nor a bomb
// fills memory); finally `{done, checkpoints, complete, error, lengths}`.
/// <reference lib="deno.worker" />
import { type Checkpoint, CheckpointBuilder } from "./gzip_checkpoints.ts";
import { NativeCheckpointBuilder } from "./native_checkpoints.ts";
import { NativeZstdDecoder } from "./native_zstd.ts";
import { type NativeLibrary, setLibraryPaths } from "./native_libs.ts";

type Message =
  | {
    init: {
      inflate: boolean;
      credits: number;
      zstd?: boolean;
      /** where the sender found the libraries (a sandbox may open no others) */
      libs?: Partial<Record<NativeLibrary, string>>;
    };
  }
  | { buffer: ArrayBuffer; length: number }
  | { credit: number }
  | { stop: true }
  | null;

// Each checkpoint's window goes back as soon as it is made: the sender writes it out, so
// neither side holds the windows of a whole layer.
const onCheckpoint = (c: Checkpoint) => {
  const window = c.window.slice();
  self.postMessage({ checkpoint: { uoff: c.uoff, coff: c.coff, member: c.member }, window }, [
    window.buffer,
  ]);
};

let builder: NativeCheckpointBuilder | NativeZstdDecoder | CheckpointBuilder | null = null;
let native: NativeCheckpointBuilder | NativeZstdDecoder | null = null;
let credits = 0;
let finishing = false;
const queue: { buffer: ArrayBuffer; length: number }[] = [];

function done(): void {
  const r = builder!.finish();
  self.postMessage({ done: true, ...r, lengths: builder!.lengths });
  self.close();
}

function pump(): void {
  while (queue.length > 0) {
    const head = queue[0];
    if (native) {
      if (native.needsInput) native.feed(new Uint8Array(head.buffer, 0, head.length));
      for (;;) {
        if (credits <= 0) return;
        const out = native.next();
        if (out === null) break;
        credits--;
        self.postMessage({ output: out.buffer, length: out.length }, [out.buffer]);
      }
    } else {
      (builder as CheckpointBuilder | NativeCheckpointBuilder).push(
        new Uint8Array(head.buffer, 0, head.length),
      );
    }
    queue.shift();
    self.postMessage({ ack: true, buffer: head.buffer }, [head.buffer]);
  }
  if (finishing) {
    const rest = native?.flush();
    if (rest?.length) self.postMessage({ output: rest.buffer, length: rest.length }, [rest.buffer]);
    done();
  }
}

self.onmessage = (e: MessageEvent<Message>) => {
  const m = e.data;
  if (m === null) {
    finishing = true;
    pump();
  } else if ("init" in m) {
    if (m.init.libs) setLibraryPaths(m.init.libs);
    if (m.init.inflate) {
      native = m.init.zstd
        ? NativeZstdDecoder.create()
        : NativeCheckpointBuilder.create(undefined, onCheckpoint, true);
      if (!native) throw new Error("native zlib/libzstd is not available in the worker");
      credits = m.init.credits;
    }
    builder = native ?? NativeCheckpointBuilder.create(undefined, onCheckpoint) ??
      new CheckpointBuilder(undefined, onCheckpoint);
  } else if ("credit" in m) {
    credits += m.credit;
    pump();
  } else if ("stop" in m) {
    done();
  } else {
    queue.push(m);
    pump();
  }
};
