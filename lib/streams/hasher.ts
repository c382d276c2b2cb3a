// Streaming digests. node:crypto hashes at ~700 MB/s here (DESIGN.md stack table); its state
// cannot be serialised, so a session resumed in another process re-hashes its bytes from disk.
import { createHash, type Hash } from "node:crypto";
import type { Algorithm } from "../oci/mod.ts";

export class Hasher {
  private readonly h: Hash;
  bytes = 0;
  constructor(readonly algorithm: Algorithm) {
    this.h = createHash(algorithm);
  }
  update(chunk: Uint8Array): void {
    this.h.update(chunk);
    this.bytes += chunk.byteLength;
  }
  /** The digest so far; the hasher stays usable (copy), so a session can keep appending. */
  peek(): string {
    return `${this.algorithm}:${this.h.copy().digest("hex")}`;
  }
}

export function digestBytes(algorithm: Algorithm, data: Uint8Array): string {
  return `${algorithm}:${createHash(algorithm).update(data).digest("hex")}`;
}
