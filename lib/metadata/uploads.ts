// Upload session records. Bytes live in the blob store under the session's uuid.
import {
  addJobs,
  CommitExhausted,
  commitWithRetry,
  conflictPause,
  K,
  type UploadRecord,
} from "../kv/mod.ts";
import { checkNotReclaiming } from "./reclaim.ts";
import {
  type BytesPlaced,
  type LinkRead,
  linkReadKeys,
  linkReadOf,
  linkUsage,
  reservationAfterConflict,
} from "./blobs.ts";
import type { UsageLedger, UsagePlan } from "./usage.ts";
import type { WriteFacts } from "./write_facts.ts";

export class UploadMeta {
  /** `usage`: repository usage kept in the completing commit (readers may omit it) */
  constructor(private readonly kv: Deno.Kv, private readonly usage?: UsageLedger) {}

  async create(ns: string, uuid: string, rec: UploadRecord): Promise<void> {
    await this.kv.set(K.upload(ns, uuid), rec);
  }

  get(ns: string, uuid: string): Promise<Deno.KvEntryMaybe<UploadRecord>> {
    return this.kv.get<UploadRecord>(K.upload(ns, uuid));
  }

  /**
   * The session, and the link its completion would write with the usage it adds to, in one read
   * (`complete`'s `seen`).
   */
  async getWithLink(
    ns: string,
    uuid: string,
    digest: string,
  ): Promise<[Deno.KvEntryMaybe<UploadRecord>, LinkRead]> {
    const [session, ...link] = await this.kv.getMany<unknown[]>([
      K.upload(ns, uuid),
      ...linkReadKeys(this.usage, ns, digest),
    ]);
    return [session as Deno.KvEntryMaybe<UploadRecord>, linkReadOf(link)];
  }

  /**
   * Moves the committed offset; returns the session as written (its versionstamp from the
   * commit, so no read follows), null when another writer changed the session meanwhile.
   */
  async advance(
    entry: Deno.KvEntry<UploadRecord>,
    offset: number,
  ): Promise<Deno.KvEntry<UploadRecord> | null> {
    const value: UploadRecord = { ...entry.value, offset, updatedAt: Date.now() };
    const r = await this.kv.atomic().check(entry).set(entry.key, value).commit();
    return r.ok ? { key: entry.key, value, versionstamp: r.versionstamp } : null;
  }

  async delete(ns: string, uuid: string): Promise<void> {
    await this.kv.delete(K.upload(ns, uuid));
  }

  /**
   * Completes a session: the session record goes and the blob is linked into `ns`, in one
   * commit guarded by the session's versionstamp (a session completes at most once) and by the
   * blob reservation (`BlobMeta.reserve`). Throws 503 RECLAMATION_IN_PROGRESS, after dropping
   * the session whose bytes scrub may have deleted, when the digest was reclaimed meanwhile.
   */
  async complete(
    entry: Deno.KvEntry<UploadRecord>,
    ns: string,
    digest: string,
    size: number,
    reserved: string,
    placed: BytesPlaced,
    effects: WriteFacts,
    /** the link as read with the session (`getWithLink`): the first attempt checks it */
    seen?: LinkRead,
  ): Promise<boolean> {
    let guard = reserved;
    let usage: Pick<UsagePlan, "apply" | "pause"> | undefined;
    let completedElsewhere = false;
    try {
      const done = await commitWithRetry<boolean>("upload complete", async () => {
        if (completedElsewhere) return { done: false };
        effects.attempt();
        const now = Date.now();
        // May throw 403 DENIED (quota): the session stays, as for any refused completion.
        usage = await linkUsage(this.kv, this.usage, ns, digest, size, seen);
        seen = undefined; // a retry reads afresh
        const op = this.kv.atomic()
          .check(entry)
          .check({ key: K.blob(digest), versionstamp: guard })
          .delete(entry.key)
          .set(K.blob(digest), { size, at: now })
          .set(K.link(ns, digest), { size, at: now })
          .set(K.owner(digest, ns), true);
        checkNotReclaiming(op, digest);
        usage.apply(op);
        const facts = effects.mutationsFor({ kind: "blob-linked", ns, digest });
        return { op: addJobs(op, facts), value: true };
      }, {
        between: async (attempt) => {
          await conflictPause(attempt);
          await usage?.pause(attempt);
          const again = await this.kv.get<UploadRecord>(entry.key);
          if (again.versionstamp !== entry.versionstamp) {
            completedElsewhere = true;
            return;
          }
          try {
            guard = await reservationAfterConflict(this.kv, digest, placed);
          } catch (e) {
            await this.kv.atomic().check(entry).delete(entry.key).commit();
            throw e;
          }
        },
      });
      if (done) effects.landed();
      return done;
    } catch (e) {
      if (!(e instanceof CommitExhausted)) throw e;
      // The KV could not commit it in time: the session's bytes were moved to the blob path, so
      // it cannot be completed again; the client is told to retry (503 + Retry-After) and
      // starts over.
      await this.kv.atomic().check(entry).delete(entry.key).commit();
      throw e;
    }
  }
}
