// The KV side of `verify` (lib/registry/verify.ts): one pass at a time (a lease, renewed while it
// runs), and the cursor an interrupted pass goes on from, per scope ("" for every blob, or one
// namespace). The walk itself reads blob/, link/ and rev/ in key order.
import {
  K,
  type LeaseFormat,
  Leases,
  type Taken,
  type VerifyCursor,
  type VerifyLease,
} from "../kv/mod.ts";

/**
 * A pass renews its lease every third of VERIFY_LEASE_MS (a KV write every 3.3 s); one that died
 * frees it within this, so a run started after a kill -9 waits seconds, not minutes (a process
 * cannot look at another's /proc entry under its permission set to tell that it died).
 */
export const VERIFY_LEASE_MS = 10_000;

/** The verify lease as stored: its holder, its last renewal, and where it runs (for messages). */
const VERIFY_LEASE: LeaseFormat<VerifyLease> = {
  write: (holder, now) => ({ holder, at: now, host: Deno.hostname(), pid: Deno.pid }),
  read: (v) => ({ holder: v.holder, until: v.at + VERIFY_LEASE_MS }),
};

export class VerifyMeta {
  private readonly leases: Leases<VerifyLease>;
  constructor(private readonly kv: Deno.Kv) {
    this.leases = new Leases(kv, VERIFY_LEASE);
  }

  /**
   * Takes the one-pass-at-a-time lease for `holder`; refused, with the holder's record, while
   * another holder renewed it within VERIFY_LEASE_MS.
   */
  lease(holder: string): Promise<Taken<VerifyLease>> {
    return this.leases.take(K.verifyLock(), holder, VERIFY_LEASE_MS);
  }

  async cursor(scope: string): Promise<VerifyCursor | null> {
    return (await this.kv.get<VerifyCursor>(K.verifyCursor(scope))).value;
  }

  async saveCursor(scope: string, c: VerifyCursor): Promise<void> {
    await this.kv.set(K.verifyCursor(scope), c);
  }

  /** blob/ records after `after` (a key under blob/), in key order, with their versionstamps. */
  blobs(after: Deno.KvKey | null): AsyncIterableIterator<Deno.KvEntry<{ size: number }>> {
    return this.after(K.blobsAll(), after);
  }

  /** `ns`'s link/ records after `after`, in key order. */
  links(
    ns: string,
    after: Deno.KvKey | null,
  ): AsyncIterableIterator<Deno.KvEntry<{ size: number }>> {
    return this.after([...K.linksAll(), ns], after);
  }

  /** rev/ records (of `ns`, or all) after `after`, in key order. */
  revisions(
    ns: string | null,
    after: Deno.KvKey | null,
  ): AsyncIterableIterator<Deno.KvEntry<{ size: number; mediaType: string; body?: Uint8Array }>> {
    return this.after(ns === null ? K.revsAll() : K.revs(ns), after);
  }

  private after<T>(
    prefix: Deno.KvKey,
    after: Deno.KvKey | null,
  ): AsyncIterableIterator<Deno.KvEntry<T>> {
    // `start` is inclusive: a key one step past `after` (a zero byte appended to its last part).
    const start = after === null ? undefined : [...after.slice(0, -1), `${String(after.at(-1))}\0`];
    return this.kv.list<T>(start ? { prefix, start } : { prefix }, { batchSize: 200 });
  }
}
