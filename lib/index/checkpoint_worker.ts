// Runs the gzip checkpoint pass (pako, pure JS) off the main thread, so it overlaps the main
// pass (native inflate, tar walk, hashing) on another core. Messages: `{buffer, length}` per
// compressed chunk, the buffer given back with the acknowledgement (the sender's flow control
// and buffer pool), then null to finish.
/// <reference lib="deno.worker" />
import { CheckpointBuilder } from "./gzip_checkpoints.ts";

// Each checkpoint's window goes back as soon as it is made: the sender writes it out, so
// neither side holds the windows of a whole layer.
const builder = new CheckpointBuilder(undefined, (c) => {
  const window = c.window.slice();
  self.postMessage({ checkpoint: { uoff: c.uoff, coff: c.coff, member: c.member }, window }, [
    window.buffer,
  ]);
});
self.onmessage = (e: MessageEvent<{ buffer: ArrayBuffer; length: number } | null>) => {
  if (e.data === null) {
    const r = builder.finish();
    self.postMessage({ done: true, ...r, lengths: builder.lengths });
    self.close();
    return;
  }
  const { buffer, length } = e.data;
  builder.push(new Uint8Array(buffer, 0, length));
  self.postMessage({ ack: true, buffer }, [buffer]);
};
