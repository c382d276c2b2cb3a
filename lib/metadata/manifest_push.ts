// A manifest push as KV commits (manifest_writes.ts tells the plan): the head commit writes the
// revision, its references when they fit (else first, in their own commits), the usage it adds,
// the verdict it was judged by and as many tags as it has checks left; the tail commits write the
// other tags, each checking its tags and the revision the head wrote.
import { RegistryError } from "../oci/mod.ts";
import {
  CommitBudget,
  commitInBatches,
  commitWithRetry,
  conflictPause,
  getAll,
  K,
  KV_LIMITS,
  type PlannedMutation,
  type ReferrerRecord,
  type RevisionRecord,
  type TagRecord,
} from "../kv/mod.ts";
import { requireOwned, reservationAfterConflict } from "./blobs.ts";
import type { UsageLedger, UsagePlan } from "./usage.ts";
import type { WriteFacts } from "./write_facts.ts";
import { type ManifestWrite, referenceMutations, set, TagCommit } from "./manifest_mutations.ts";

/** Tags one commit can check besides the revision: what a head or tail commit reads of them. */
const TAGS_PER_COMMIT = KV_LIMITS.checks - 1;
/** Keys one `getMany` takes (Deno KV's limit). */
const KV_GET_MANY_MAX = 10;

const REFERRER_ANNOTATIONS_MAX = 16 * 1024;

function referrerRecord(w: ManifestWrite): ReferrerRecord {
  const rec: ReferrerRecord = { mediaType: w.record.mediaType, size: w.record.size };
  if (w.parsed.artifactType) rec.artifactType = w.parsed.artifactType;
  const ann = w.parsed.annotations;
  if (ann && JSON.stringify(ann).length <= REFERRER_ANNOTATIONS_MAX) rec.annotations = ann;
  return rec;
}

function sameBytes(a: Uint8Array | undefined, b: Uint8Array): boolean {
  return a !== undefined && a.byteLength === b.byteLength && a.every((x, i) => x === b[i]);
}

export async function commitManifest(
  kv: Deno.Kv,
  w: ManifestWrite,
  fx: WriteFacts,
  usage?: UsageLedger,
): Promise<void> {
  const { ns, digest } = w;
  const refs = referenceMutations(ns, digest, w.parsed);
  // Every guard sees the stored tags before anything is written, so a refused tag (immutable,
  // superseded) leaves no trace even when the push takes several commits.
  const tagKeys = w.tags.map((t) => K.tag(ns, t));
  // The head commit writes at most TAGS_PER_COMMIT of them, the first ones.
  const headKeys = tagKeys.slice(0, TAGS_PER_COMMIT);
  // What the first attempt takes as read instead of reading it again: the head's tags as the
  // guards saw them (its commit checks each, so a tag write in between fails it) and, with few
  // tags, the revision and the usage a new revision adds to, read with them (issue 25: one
  // round trip; one snapshot, as consistent as reading apart).
  let first: {
    tags: Deno.KvEntryMaybe<TagRecord>[];
    rev?: Deno.KvEntryMaybe<RevisionRecord>;
    usage?: Deno.KvEntryMaybe<unknown>[];
  } | null;
  let before: Deno.KvEntryMaybe<TagRecord>[];
  if (tagKeys.length + 1 <= KV_GET_MANY_MAX) {
    const usageKeys = usage?.keysFor(ns, digest) ?? [];
    const withUsage = usageKeys.length > 0 &&
      tagKeys.length + 1 + usageKeys.length <= KV_GET_MANY_MAX;
    const all = await kv.getMany<unknown[]>([
      K.rev(ns, digest),
      ...tagKeys,
      ...(withUsage ? usageKeys : []),
    ]);
    before = all.slice(1, 1 + tagKeys.length) as Deno.KvEntryMaybe<TagRecord>[];
    first = {
      tags: before,
      rev: all[0] as Deno.KvEntryMaybe<RevisionRecord>,
      usage: withUsage ? all.slice(1 + tagKeys.length) : undefined,
    };
  } else {
    before = await getAll<TagRecord>(kv, tagKeys);
    first = { tags: before.slice(0, headKeys.length) };
  }
  before.forEach((e, i) => w.guard(w.tags[i], e.value));
  let refsWritten = false;
  let reserved = w.reserved;
  // What the last attempt read, for the step between attempts.
  let last: { plan?: UsagePlan; outOfLine: boolean } = { outOfLine: false };
  const head = await commitWithRetry("manifest push", async () => {
    for (;;) {
      fx.attempt();
      const read = first; // the first attempt's only: a retry reads afresh
      first = null;
      let rev: Deno.KvEntryMaybe<RevisionRecord>;
      let tagEntries: Deno.KvEntryMaybe<TagRecord>[];
      if (read?.rev) [rev, tagEntries] = [read.rev, read.tags];
      else {
        const got = await kv.getMany<unknown[]>([K.rev(ns, digest), ...headKeys]);
        rev = got[0] as Deno.KvEntryMaybe<RevisionRecord>;
        tagEntries = read?.tags ?? got.slice(1) as Deno.KvEntryMaybe<TagRecord>[];
      }
      const owned = w.requireBlobs && !rev.value
        ? await requireOwned(kv, ns, w.parsed.blobs)
        : null;
      // The first attempt checks the pin as the judgement read it (no read: a moved pin fails
      // the commit); a retry reads it and hands a moved one back to be judged again.
      const pinned = !w.pin
        ? null
        : read
        ? { key: w.pin.key, versionstamp: w.pin.versionstamp }
        : await kv.get(w.pin.key);
      if (w.pin && pinned!.versionstamp !== w.pin.versionstamp) throw w.pin.stale();
      const op = kv.atomic();
      const budget = new CommitBudget();
      budget.checkOn(op, rev);
      if (pinned) budget.checkOn(op, pinned);
      const outOfLine = !rev.value && reserved !== null;
      let plan: UsagePlan | undefined;
      const fixed: PlannedMutation[] = [set(K.ns(ns), { at: Date.now() })];
      if (w.tags.length > 0) fixed.push(set(K.tagver(ns), true));
      let rewritesRev = false;
      if (!rev.value) {
        fixed.push(set(K.rev(ns, digest), w.record), set(K.refver(ns), true));
        rewritesRev = true;
        if (outOfLine) {
          // The body was just written to the blob store: keep scrub from reclaiming it.
          budget.checkOn(op, { key: K.blob(digest), versionstamp: reserved });
          budget.checkOn(op, { key: K.reclaim(digest), versionstamp: null });
          fixed.push(set(K.body(digest, ns), true));
        }
        // A blob delete in ns since `owned` was read fails this commit; one committed after it
        // sees refver moved (or the references) and refuses (BlobMeta.unlink).
        if (owned) budget.checkOn(op, owned);
        if (w.parsed.subject) {
          fixed.push(set(K.referrer(ns, w.parsed.subject, digest), referrerRecord(w)));
        }
        fixed.push(
          ...fx.mutationsFor({
            kind: "revision-added",
            ns,
            digest,
            parsed: w.parsed,
            held: w.held,
          }),
        );
        // The revision is a new member of the repository's usage (403 DENIED past its quota).
        plan = await usage?.planAdd(ns, digest, w.record.size, read?.usage);
        if (plan && !plan.fits(budget)) throw new Error("manifest head exceeds KV limits");
        plan?.apply(op);
      } else if (w.record.body && !sameBytes(rev.value.body, w.record.body)) {
        // A body kept here that no longer hashes to its digest (bit rot: every read refuses it)
        // is replaced by a push of the digest; the revision stays the one stored (issue 38).
        fixed.push(set(K.rev(ns, digest), { ...rev.value, body: w.record.body }));
        rewritesRev = true;
      }
      fixed.push(...fx.mutationsFor({ kind: "manifest-pushed", ns, digest }));
      if (w.head) fixed.push(...w.head);
      if (!budget.addAll(op, fixed)) throw new Error("manifest head exceeds KV limits");
      await w.alongside?.add(op, budget, Math.min(tagEntries.length, TAGS_PER_COMMIT));
      // The head's tags take the checks left (at least 3: rev, pin, reservation, reclaim
      // marker, unlinkver and the usage plan's two take 7 at most).
      const tags = new TagCommit(op, budget, w, fx, !rev.value);
      let t = 0;
      while (t < tagEntries.length && tags.add(w.tags[t], tagEntries[t])) t++;
      if (!rev.value && !refsWritten && !(t === w.tags.length && budget.addAll(op, refs))) {
        await commitInBatches(kv, refs, [set(K.refver(ns), true)]);
        refsWritten = true;
        continue; // rebuild the head without the references
      }
      last = { plan, outOfLine };
      // The tail commits check the revision against the versionstamp this one leaves it at.
      const revStamp = rewritesRev ? null : rev.versionstamp;
      return { op, landed: (versionstamp: string) => ({ t, revStamp: revStamp ?? versionstamp }) };
    }
  }, {
    between: async (attempt) => {
      await conflictPause(attempt);
      await last.plan?.pause(attempt);
      if (last.outOfLine) reserved = await reservationAfterConflict(kv, digest, w.placed);
    },
  });
  fx.landed();
  w.alongside?.landed();
  if (head.t < w.tags.length) {
    await commitTailTags(kv, w, fx, head.t, head.revStamp);
  }
}

/** Tags `w.tags[from..]` in commits of TAGS_PER_COMMIT, each checking its tags and the revision. */
async function commitTailTags(
  kv: Deno.Kv,
  w: ManifestWrite,
  fx: WriteFacts,
  from: number,
  revStamp: string,
): Promise<void> {
  const { ns, digest } = w;
  while (from < w.tags.length) {
    const n = await commitWithRetry("manifest tags", async () => {
      fx.attempt();
      const slice = w.tags.slice(from, from + TAGS_PER_COMMIT);
      const entries = await kv.getMany<TagRecord[]>(slice.map((t) => K.tag(ns, t)));
      const op = kv.atomic();
      const budget = new CommitBudget();
      budget.checkOn(op, { key: K.rev(ns, digest), versionstamp: revStamp });
      budget.addAll(op, [set(K.tagver(ns), true)]);
      const tags = new TagCommit(op, budget, w, fx, false);
      let n = 0;
      while (n < slice.length && tags.add(slice[n], entries[n])) n++;
      if (n === 0) throw new Error("a tag write exceeds KV's commit limits");
      return { op, value: n };
    }, {
      between: async (attempt) => {
        await conflictPause(attempt);
        const rev = await kv.get(K.rev(ns, digest));
        if (rev.versionstamp !== revStamp) {
          throw new RegistryError("MANIFEST_UNKNOWN", `${digest} was deleted while being tagged`);
        }
      },
    });
    fx.landed();
    from += n;
  }
}
