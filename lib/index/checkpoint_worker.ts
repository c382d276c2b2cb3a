// Runs the gzip checkpoint pass (pako, pure JS) off the main thread, so it overlaps the main
// pass (native inflate, tar walk, hashing) on another core. Messages: an ArrayBuffer per
// compressed chunk (acknowledged, for the sender's flow control), then null to finish.
/// <reference lib="deno.worker" />
import { CheckpointBuilder } from "./gzip_checkpoints.ts";

const builder = new CheckpointBuilder();
self.onmessage = (e: MessageEvent<ArrayBuffer | null>) => {
  if (e.data === null) {
    const r = builder.finish();
    self.postMessage({ done: true, ...r });
    self.close();
    return;
  }
  builder.push(new Uint8Array(e.data));
  self.postMessage({ ack: true });
};
