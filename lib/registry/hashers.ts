// In-memory hashers of open upload sessions, keyed by uuid and valid for one committed offset.
// A miss (restart, another process, eviction) rebuilds the hash from the session's bytes on
// disk, which is what makes sessions resumable without serialising hash state.
import { Hasher } from "../streams/mod.ts";
import type { Algorithm } from "../oci/mod.ts";
import type { BlobStore } from "../storage/mod.ts";

const MAX_CACHED = 4096;

export class HasherCache {
  private readonly map = new Map<string, { offset: number; hasher: Hasher }>();
  constructor(private readonly store: BlobStore) {}

  async take(uuid: string, algorithm: Algorithm, offset: number): Promise<Hasher> {
    const hit = this.map.get(uuid);
    this.map.delete(uuid);
    if (hit && hit.offset === offset && hit.hasher.algorithm === algorithm) return hit.hasher;
    return await this.rehash(uuid, algorithm, offset);
  }

  async rehash(uuid: string, algorithm: Algorithm, offset: number): Promise<Hasher> {
    const h = new Hasher(algorithm);
    if (offset > 0) {
      for await (const chunk of await this.store.readUpload(uuid, offset)) h.update(chunk);
    }
    if (h.bytes !== offset) {
      throw new Error(`upload ${uuid}: ${h.bytes} bytes on disk, ${offset} committed`);
    }
    return h;
  }

  put(uuid: string, offset: number, hasher: Hasher): void {
    if (this.map.size >= MAX_CACHED) this.map.delete(this.map.keys().next().value!);
    this.map.set(uuid, { offset, hasher });
  }

  drop(uuid: string): void {
    this.map.delete(uuid);
  }
}

/** Serialises work per key inside this process (PATCHes of one session). */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<unknown>>();
  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(key) ?? Promise.resolve();
    const next = prev.catch(() => {}).then(fn);
    this.tails.set(key, next);
    try {
      return await next;
    } finally {
      if (this.tails.get(key) === next) this.tails.delete(key);
    }
  }
}
