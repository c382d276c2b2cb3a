// The ETag of each part of an upload session as this process last wrote or read it: completion
// assembles only parts that still hold the bytes this process hashed.
import { ConcurrentUploadError } from "./blob_store.ts";
import type { S3Layout } from "./s3_layout.ts";

/** Sessions whose part ETags are remembered: more than the hasher cache keeps (hashers.ts). */
const SEEN_KEPT = 8192;

/** Part ETags per session, bounded (SEEN_KEPT). */
export class PartEtags {
  /**
   * Per upload session, the ETag of each part as this process last wrote or read it, i.e. of the
   * bytes its hasher saw. Two processes writing one session (a client sending the same PATCH to
   * two replicas) can leave a part holding the loser's bytes while the winner's hasher holds the
   * digest of its own: completion checks every part's ETag against these before assembling, so
   * such a session fails instead of storing bytes that do not hash to the digest. A session this
   * process knows nothing of is rehashed from its parts first (hashers.ts), which fills this in.
   */
  readonly seen = new Map<string, Map<number, string>>();

  constructor(private readonly s3: S3Layout) {}

  see(uuid: string, k: number, etag: string): void {
    let parts = this.seen.get(uuid);
    // Touched sessions move to the back, as the hasher cache's do on every PATCH: a long upload
    // must not lose its ETags to newer sessions while its hasher is still cached.
    if (parts) this.seen.delete(uuid);
    else {
      if (this.seen.size >= SEEN_KEPT) this.seen.delete(this.seen.keys().next().value!);
      parts = new Map();
    }
    this.seen.set(uuid, parts);
    parts.set(k, etag);
  }

  /** Part `k` of `uuid` still holds the bytes this process saw (see `seen`). */
  checkSeen(uuid: string, k: number, etag: string): void {
    const want = this.seen.get(uuid)?.get(k);
    if (want === undefined || want !== etag) {
      throw new ConcurrentUploadError(
        `upload ${uuid}: part ${k} was written by another process meanwhile`,
      );
    }
  }

  /** Parts 0..n-1 of `uuid` are all stored and hold what this process saw (see `seen`). */
  async partsAsSeen(uuid: string, n: number): Promise<boolean> {
    const seen = this.seen.get(uuid);
    if (!seen) return false;
    const dir = this.s3.uploadDir(uuid);
    let ok = 0;
    for await (const o of this.s3.client.list(dir)) {
      const name = o.key.slice(dir.length);
      if (!/^\d{6,}$/.test(name)) continue; // the multipart marker
      const k = Number(name);
      if (k >= n) continue;
      if (seen.get(k) !== o.etag) return false;
      ok++;
    }
    return ok === n;
  }
}
