// Blob ownership: which namespaces may read which digests.
import { RegistryError, stillReferenced } from "../oci/mod.ts";
import {
  addJobs,
  type BlobRecord,
  commitWithRetry,
  conflictPause,
  getAll,
  hasAny,
  K,
  type LinkRecord,
} from "../kv/mod.ts";
import type { WriteFacts } from "./write_facts.ts";
import { checkNotReclaiming, explainConflict, reclaimingError } from "./reclaim.ts";
import type { UsageLedger, UsagePlan } from "./usage.ts";

/**
 * A link entry as read before a linking commit, with the entries of the usage that commit adds
 * to when they were read alongside (`UsageLedger.keysFor`): its first attempt checks them.
 */
export interface LinkRead {
  link: Deno.KvEntryMaybe<LinkRecord>;
  usage?: Deno.KvEntryMaybe<unknown>[];
}

/** The keys of a LinkRead: `ns`'s link of `digest`, then (with a ledger) the usage it adds to. */
export function linkReadKeys(
  ledger: UsageLedger | undefined,
  ns: string,
  digest: string,
): Deno.KvKey[] {
  return [K.link(ns, digest), ...(ledger?.keysFor(ns, digest) ?? [])];
}

/** The LinkRead of the entries of `linkReadKeys`, in their order (a caller may read more). */
export function linkReadOf(entries: Deno.KvEntryMaybe<unknown>[]): LinkRead {
  const [link, ...usage] = entries;
  const read: LinkRead = { link: link as Deno.KvEntryMaybe<LinkRecord> };
  if (usage.length > 0) read.usage = usage;
  return read;
}

/** Reads `ns`'s link of `digest` and, with a ledger, the usage a new link adds to: one getMany. */
export async function readLink(
  kv: Deno.Kv,
  ledger: UsageLedger | undefined,
  ns: string,
  digest: string,
): Promise<LinkRead> {
  return linkReadOf(await kv.getMany(linkReadKeys(ledger, ns, digest)));
}

/**
 * Reads what a commit setting link/<ns>/<digest> needs for usage (lib/metadata/usage.ts): a
 * check of the link as read and, when it is new, the usage plan (403 DENIED past a quota).
 */
export async function linkUsage(
  kv: Deno.Kv,
  ledger: UsageLedger | undefined,
  ns: string,
  digest: string,
  size: number,
  /** the link (and usage) as the caller just read them (saves reading them again) */
  seen?: LinkRead,
): Promise<Pick<UsagePlan, "apply" | "pause">> {
  if (!ledger) return { apply: () => {}, pause: () => Promise.resolve() };
  // The link and the usage a new link adds to, in one read (issue 25).
  const { link, usage: read } = seen ?? await readLink(kv, ledger, ns, digest);
  const plan = link.versionstamp === null ? await ledger.planAdd(ns, digest, size, read) : null;
  return {
    apply: (op) => {
      op.check(link);
      plan?.apply(op);
    },
    pause: (attempt) => plan?.pause(attempt) ?? Promise.resolve(),
  };
}

/** Whether the bytes of a digest are in the blob store right now. */
export type BytesPlaced = () => Promise<boolean>;

/**
 * After a reserved write conflicted: 503 if the digest is being (or was) reclaimed since the
 * reservation, or if its bytes are gone from the store (a reclamation completed and another
 * writer's reservation took its place before its bytes landed); otherwise another writer
 * refreshed the record over bytes that are in place, and the caller retries against its
 * versionstamp.
 */
export async function reservationAfterConflict(
  kv: Deno.Kv,
  digest: string,
  placed: BytesPlaced,
): Promise<string> {
  await explainConflict(kv, [digest]);
  const rec = await kv.get(K.blob(digest));
  if (rec.versionstamp === null || !(await placed())) throw reclaimingError(digest);
  return rec.versionstamp;
}

export class BlobMeta {
  /** `usage`: repository usage kept in the linking commits (readers may omit it) */
  constructor(private readonly kv: Deno.Kv, private readonly usage?: UsageLedger) {}

  async link(ns: string, digest: string): Promise<LinkRecord | null> {
    return (await this.linkEntry(ns, digest)).value;
  }

  private linkEntry(ns: string, digest: string): Promise<Deno.KvEntryMaybe<LinkRecord>> {
    return this.kv.get<LinkRecord>(K.link(ns, digest));
  }

  /** The link entry and the usage it adds to, for a later `addLink` to check (one read). */
  linkRead(ns: string, digest: string): Promise<LinkRead> {
    return readLink(this.kv, this.usage, ns, digest);
  }

  async blob(digest: string): Promise<BlobRecord | null> {
    return (await this.kv.get<BlobRecord>(K.blob(digest))).value;
  }

  /**
   * Step 1 of placing bytes for `digest`: refreshes its record (so a scrub that judged it
   * unreferenced can no longer claim it) unless a reclamation is under way (503). Returns the
   * record's versionstamp, which `addLink`/`UploadMeta.complete` check: if scrub reclaimed the
   * digest in between, the record is gone and the link is refused instead of dangling.
   */
  async reserve(digest: string, size: number): Promise<string> {
    return await commitWithRetry("blob reserve", () => {
      const op = this.kv.atomic().set(
        K.blob(digest),
        { size, at: Date.now() } satisfies BlobRecord,
      );
      checkNotReclaiming(op, digest);
      return Promise.resolve({ op, landed: (versionstamp: string) => versionstamp });
    }, {
      attempts: 3,
      between: () => explainConflict(this.kv, [digest]),
      exhausted: () => reclaimingError(digest),
    });
  }

  /**
   * Step 2, after the bytes are in place: `ns` owns them. One commit, with the jobs it causes
   * (`effects` hears `blob-linked`).
   */
  async addLink(
    ns: string,
    digest: string,
    size: number,
    reserved: string,
    placed: BytesPlaced,
    effects: WriteFacts,
    /** the link as read before the bytes moved (`linkRead`): the first attempt checks it */
    seen?: LinkRead,
  ): Promise<void> {
    let guard = reserved;
    let usage: Pick<UsagePlan, "apply" | "pause"> | undefined;
    await commitWithRetry("blob link", async () => {
      effects.attempt();
      const now = Date.now();
      usage = await linkUsage(this.kv, this.usage, ns, digest, size, seen);
      seen = undefined; // a retry reads afresh
      const op = this.kv.atomic()
        .check({ key: K.blob(digest), versionstamp: guard })
        .set(K.blob(digest), { size, at: now } satisfies BlobRecord)
        .set(K.link(ns, digest), { size, at: now } satisfies LinkRecord)
        .set(K.owner(digest, ns), true);
      checkNotReclaiming(op, digest);
      usage.apply(op);
      return {
        op: addJobs(op, effects.mutationsFor({ kind: "blob-linked", ns, digest })),
        value: undefined,
      };
    }, {
      // Every concurrent push of the digest refreshes its blob record (many clients pushing a
      // shared base layer): retried while the bytes stay in place, as long as it takes.
      between: async (attempt) => {
        await conflictPause(attempt);
        await usage?.pause(attempt);
        guard = await reservationAfterConflict(this.kv, digest, placed);
      },
    });
    effects.landed();
  }

  /** Links an existing blob into `ns` (mount); false when the blob record is gone. */
  async mount(ns: string, digest: string, effects: WriteFacts): Promise<boolean> {
    const b = await this.kv.get<BlobRecord>(K.blob(digest));
    if (!b.value) return false;
    const usage = await linkUsage(this.kv, this.usage, ns, digest, b.value.size);
    effects.attempt();
    const op = this.kv.atomic()
      .check(b)
      .set(K.link(ns, digest), { size: b.value.size, at: Date.now() } satisfies LinkRecord)
      .set(K.owner(digest, ns), true);
    // A mount racing reclamation of its source is simply unsatisfiable: the client uploads.
    checkNotReclaiming(op, digest);
    usage.apply(op);
    const facts = effects.mutationsFor({ kind: "blob-linked", ns, digest });
    if (!(await addJobs(op, facts).commit()).ok) return false;
    effects.landed();
    return true;
  }

  /** Namespaces that own `digest`, in key order, at most `limit`. */
  async owners(digest: string, limit = 100): Promise<string[]> {
    const out: string[] = [];
    for await (const e of this.kv.list({ prefix: K.owners(digest) }, { limit })) {
      out.push(e.key[2] as string);
    }
    return out;
  }

  /** SPEC: DELETE blob → 405 DENIED while a manifest of the namespace references it. */
  async unlink(ns: string, digest: string, effects: WriteFacts): Promise<void> {
    await commitWithRetry("blob delete", async () => {
      effects.attempt();
      const link = await this.kv.get<LinkRecord>(K.link(ns, digest));
      if (!link.value) throw new RegistryError("BLOB_UNKNOWN", digest);
      // Read before the scan: a commit adding references in ns after this read rewrites
      // refver, so this delete fails and rescans instead of racing it.
      const refver = await this.kv.get(K.refver(ns));
      if (await hasAny(this.kv, K.brefs(ns, digest))) {
        throw stillReferenced("blob is referenced by a manifest in this namespace");
      }
      // unlinkver tells strict-mode manifest commits that read the link before this one that
      // it is gone.
      const op = this.kv.atomic().check(link).check(refver).delete(K.link(ns, digest))
        .delete(K.owner(digest, ns)).set(K.unlinkver(ns), true);
      (await this.usage?.planRemove(ns, digest, link.value.size))?.apply(op);
      const facts = effects.mutationsFor({ kind: "blob-unlinked", ns, digest });
      return { op: addJobs(op, facts), value: undefined };
    });
    effects.landed();
  }
}

/**
 * For a manifest commit that requires its blobs to be owned (allow_missing_manifest_references
 * = false): reads the namespace's unlinkver, then every referenced link, MANIFEST_BLOB_UNKNOWN
 * if one is missing. The commit checks unlinkver, and a blob delete checks refver (which the
 * commit rewrites), so the two cannot both succeed: the delete would leave the manifest
 * pointing at a blob the namespace no longer owns. One key each way, whatever the count.
 */
export async function requireOwned(
  kv: Deno.Kv,
  ns: string,
  digests: string[],
): Promise<Deno.KvEntryMaybe<unknown>> {
  const version = await kv.get(K.unlinkver(ns));
  const links = await getAll<LinkRecord>(kv, digests.map((d) => K.link(ns, d)));
  links.forEach((l, i) => {
    if (!l.value) throw new RegistryError("MANIFEST_BLOB_UNKNOWN", digests[i]);
  });
  return version;
}
