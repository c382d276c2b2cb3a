// The KV side of `verify` (lib/registry/verify.ts): one pass at a time (a lease, renewed while it
// runs), and the cursor an interrupted pass goes on from, per scope ("" for every blob, or one
// namespace). The walk itself reads blob/, link/ and rev/ in key order.
import { K, type VerifyCursor, type VerifyLease } from "../kv/mod.ts";

/**
 * A pass renews its lease every VERIFY_LEASE_MS / 4 (a KV write every 2.5 s); one that died frees
 * it within this, so a run started after a kill -9 waits seconds, not minutes (a process cannot
 * look at another's /proc entry under its permission set to tell that it died).
 */
export const VERIFY_LEASE_MS = 10_000;

export class VerifyMeta {
  constructor(private readonly kv: Deno.Kv) {}

  /**
   * Takes (or renews) the lease for `lease.holder`; refused, with the holder, while another
   * holder's lease is younger than VERIFY_LEASE_MS.
   */
  async lock(lease: VerifyLease): Promise<{ ok: true } | { ok: false; held: VerifyLease }> {
    const e = await this.kv.get<VerifyLease>(K.verifyLock());
    const held = e.value;
    if (held && held.holder !== lease.holder && Date.now() - held.at < VERIFY_LEASE_MS) {
      return { ok: false, held };
    }
    const r = await this.kv.atomic().check(e).set(K.verifyLock(), { ...lease, at: Date.now() })
      .commit();
    if (r.ok) return { ok: true };
    const now = (await this.kv.get<VerifyLease>(K.verifyLock())).value;
    return now && now.holder !== lease.holder ? { ok: false, held: now } : { ok: true };
  }

  async unlock(holder: string): Promise<void> {
    const e = await this.kv.get<VerifyLease>(K.verifyLock());
    if (e.value?.holder === holder) await this.kv.atomic().check(e).delete(e.key).commit();
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
