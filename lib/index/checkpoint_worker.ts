// Runs the gzip checkpoint pass (pako, pure JS) off the main thread, so it overlaps the main
// pass (native inflate, tar walk, hashing) on another core. Messages: `{buffer, length}` per
// compressed chunk, the buffer given back with the acknowledgement (the sender's flow control
// and buffer pool), then null to finish.
/// <reference lib="deno.worker" />
import { CheckpointBuilder } from "./gzip_checkpoints.ts";

const builder = new CheckpointBuilder();
self.onmessage = (e: MessageEvent<{ buffer: ArrayBuffer; length: number } | null>) => {
  if (e.data === null) {
    const r = builder.finish();
    self.postMessage({ done: true, ...r });
    self.close();
    return;
  }
  const { buffer, length } = e.data;
  builder.push(new Uint8Array(buffer, 0, length));
  self.postMessage({ ack: true, buffer }, [buffer]);
};
