// Manifest push and delete as KV commits that fit the strictest KV backend whatever the manifest
// or request holds (KV_LIMITS: 10 checks, 1,000 mutations, 80 KiB of keys per commit).
//
// Each write checks only the keys whose change would make it wrong, so writes that merely share
// a namespace never conflict (a CI fleet retagging `latest` all day beside deletes and pushes):
// - a tag write checks each tag key it read: its guard judged that value, and it drops the
//   tagrev of the revision the tag leaves. A push naming more tags than its head commit has
//   checks left writes the others in further commits, each checking its tags and the revision;
// - a delete by digest checks the revision and its revtagver/<ns>/<digest>, which every commit
//   changing which tags name that revision rewrites (a tag pointed at it, moved off it,
//   deleted), so only tag writes of that revision conflict with it;
// - sets a client can grow are guarded by one version key: every commit adding references
//   rewrites refver/<ns>, every blob delete rewrites unlinkver/<ns> (blobs.ts).
// tagver/<ns> is still rewritten by every tag change, blindly (no check: a blind set conflicts
// with nothing), for listTags' cache. Where a conflict is real, the loser retries until it wins
// (commitWithRetry: for up to COMMIT_RETRY_MS, then 503 saying the KV is overloaded).
//
// What does not fit one commit is split in a safe order:
// - references (bref/mref) go first: a reference without its revision only makes blob deletes
//   refuse and scrub keep bytes, never the reverse, and a retried push completes it;
// - tags beyond the head commit follow it, each batch checking that the revision is still the
//   one the head wrote (a concurrent delete stops the push instead of leaving dangling tags);
// - a delete drops tags first (a revision with fewer tags is a state clients can see anyway),
//   then the revision, then the references derived from its body.
import { type ParsedManifest, type Platform, RegistryError } from "../oci/mod.ts";
import {
  CommitBudget,
  commitInBatches,
  commitWithRetry,
  conflictPause,
  getAll,
  K,
  keySize,
  KV_LIMITS,
  type PlannedMutation,
  type ReferrerRecord,
  type RevisionRecord,
  type TagRecord,
} from "../kv/mod.ts";
import { type BytesPlaced, requireOwned, reservationAfterConflict } from "./blobs.ts";
import type { UsageLedger, UsagePlan } from "./usage.ts";
import type { WriteFacts } from "./write_facts.ts";

/** Tags one commit can check besides the revision: what a head or tail commit reads of them. */
const TAGS_PER_COMMIT = KV_LIMITS.checks - 1;
/** Keys one `getMany` takes (Deno KV's limit). */
const KV_GET_MANY_MAX = 10;

export interface TagGuard {
  /** throws to refuse moving/creating `tag` given what is stored now */
  (tag: string, existing: TagRecord | null): void;
}

export interface ManifestWrite {
  ns: string;
  digest: string;
  record: RevisionRecord;
  parsed: ParsedManifest;
  tags: string[];
  tagCreatedAt: number;
  guard: TagGuard;
  /** the blob reservation of an out-of-line body (BlobMeta.reserve), null when inline */
  reserved: string | null;
  /** whether the out-of-line body is still in the blob store (see reservationAfterConflict) */
  placed: BytesPlaced;
  /**
   * allow_missing_manifest_references = false: the namespace must own every referenced blob
   * (requireOwned, read afresh on each attempt; the head commit checks its unlinkver).
   */
  requireBlobs?: boolean;
  /**
   * Signature verification (issue 34): the verdict this push commits was judged while `pin` was
   * at `versionstamp` (sigver: every signature of the digest and every verdict change rewrites
   * it). Each attempt reads it afresh and throws `stale()` when it moved (a signature arrived:
   * the caller judges again), and the head commit checks it.
   */
  pin?: { key: Deno.KvKey; versionstamp: string | null; stale: () => Error };
  /** the image is held (issue 34): its revision is not shown anywhere until released */
  held?: boolean;
  /** mutations the head commit carries besides the revision's (the verdict, held tags) */
  head?: PlannedMutation[];
  /** mutations each written tag carries (a held tag the push replaces) */
  perTag?: (tag: string) => PlannedMutation[];
}

/** Whether writing `tag` changes it: a write that changes nothing causes no job (no ping-pong). */
function tagChanges(w: ManifestWrite, existing: TagRecord | null): boolean {
  return !existing || existing.digest !== w.digest || existing.createdAt !== w.tagCreatedAt;
}

/**
 * The tag writes of one commit. Each checks its tag key as read and carries its mutations, the
 * revisions it leaves and joins getting their revtagver rewritten once per commit.
 */
class TagCommit {
  private readonly touched: Set<string>;

  constructor(
    private readonly op: Deno.AtomicOperation,
    private readonly budget: CommitBudget,
    private readonly w: ManifestWrite,
    private readonly fx: WriteFacts,
    /** the revision, when this commit creates it: nobody read its revtagver to check */
    created: boolean,
  ) {
    this.touched = new Set(created ? [w.digest] : []);
  }

  /** Adds writing `tag` over `entry` (as read), guarded first; false when it does not fit. */
  add(tag: string, entry: Deno.KvEntryMaybe<TagRecord>): boolean {
    const { w, fx } = this;
    const existing = entry.value;
    w.guard(tag, existing);
    // Checks run out first (a tag's mutations are a few small keys): counted before its fact is
    // stated, so a tag left for the next commit states it there only.
    if (!this.budget.check(entry.key)) return false;
    const muts = tagMutations(w.ns, w.digest, tag, existing, w.tagCreatedAt, this.touched);
    if (w.perTag) muts.push(...w.perTag(tag));
    if (tagChanges(w, existing)) {
      const { ns, digest } = w;
      muts.push(...fx.mutationsFor({ kind: "tag-changed", ns, digest, tag, previous: existing }));
    }
    // A unit that does not fit ends the commit's tags, so what `touched` took for it is moot.
    if (!this.budget.addAll(this.op, muts)) return false;
    this.op.check(entry);
    return true;
  }
}

const REFERRER_ANNOTATIONS_MAX = 16 * 1024;

function referrerRecord(w: ManifestWrite): ReferrerRecord {
  const rec: ReferrerRecord = { mediaType: w.record.mediaType, size: w.record.size };
  if (w.parsed.artifactType) rec.artifactType = w.parsed.artifactType;
  const ann = w.parsed.annotations;
  if (ann && JSON.stringify(ann).length <= REFERRER_ANNOTATIONS_MAX) rec.annotations = ann;
  return rec;
}

const set = (key: Deno.KvKey, value: unknown): PlannedMutation => ({ kind: "set", key, value });

function sameBytes(a: Uint8Array | undefined, b: Uint8Array): boolean {
  return a !== undefined && a.byteLength === b.byteLength && a.every((x, i) => x === b[i]);
}
const del = (key: Deno.KvKey): PlannedMutation => ({ kind: "delete", key });

/** Platform strings are free-form in a manifest; the stored copy is cut so a value stays small. */
const PLATFORM_FIELD_MAX = 128;

function storedPlatform(p: Platform | undefined): Platform | null {
  if (!p) return null;
  const out: Platform = {
    os: p.os.slice(0, PLATFORM_FIELD_MAX),
    architecture: p.architecture.slice(0, PLATFORM_FIELD_MAX),
  };
  if (p.variant !== undefined) out.variant = p.variant.slice(0, PLATFORM_FIELD_MAX);
  return out;
}

/** The references a manifest body adds to its namespace. */
function referenceMutations(ns: string, digest: string, parsed: ParsedManifest) {
  return [
    ...parsed.blobs.map((b) => set(K.bref(ns, b, digest), true)),
    ...parsed.children.map((c) => set(K.mref(ns, c.digest, digest), storedPlatform(c.platform))),
  ];
}

/**
 * Creating or moving `tag` of `ns` to `digest` (also the release of a held image's tags), with
 * the revtagver of each revision whose tags this changes, unless `touched` (the revisions the
 * commit already rewrites it for, updated here) has it.
 */
export function tagMutations(
  ns: string,
  digest: string,
  tag: string,
  existing: TagRecord | null,
  createdAt: number,
  touched: Set<string>,
): PlannedMutation[] {
  const out: PlannedMutation[] = [];
  if (existing && existing.digest !== digest) {
    out.push(del(K.tagrev(ns, existing.digest, tag)), ...touch(ns, existing.digest, touched));
  }
  out.push(set(K.tag(ns, tag), { digest, createdAt } satisfies TagRecord));
  out.push(set(K.tagrev(ns, digest, tag), true), ...touch(ns, digest, touched));
  return out;
}

/** Rewrites `digest`'s revtagver once per commit (`touched`): a delete of it checks it. */
function touch(ns: string, digest: string, touched: Set<string>): PlannedMutation[] {
  if (touched.has(digest)) return [];
  touched.add(digest);
  return [set(K.revTagVersion(ns, digest), true)];
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

/** DELETE by tag: only that tag goes. `guard` sees the stored tag (LWW). */
export async function deleteTag(
  kv: Deno.Kv,
  ns: string,
  tag: string,
  guard: (t: TagRecord) => void,
  fx: WriteFacts,
): Promise<void> {
  await commitWithRetry("tag delete", async () => {
    fx.attempt();
    const e = await kv.get<TagRecord>(K.tag(ns, tag));
    if (!e.value) throw new RegistryError("MANIFEST_UNKNOWN", `tag ${tag}`);
    guard(e.value);
    const digest = e.value.digest;
    // tagver is rewritten in the same commit, so listTags' cached list is dropped with it; the
    // revision's revtagver tells a delete of it that one of its tags went.
    const op = kv.atomic();
    const budget = new CommitBudget();
    budget.checkOn(op, e);
    const muts = [
      del(K.tag(ns, tag)),
      del(K.tagrev(ns, digest, tag)),
      set(K.tagver(ns), true),
      set(K.revTagVersion(ns, digest), true),
      ...fx.mutationsFor({ kind: "tag-deleted", ns, tag, digest }),
    ];
    if (!budget.addAll(op, muts)) throw new Error("tag delete exceeds KV limits");
    return { op, value: undefined };
  });
  fx.landed();
}

/**
 * DELETE by digest: the revision, every tag pointing at it and the references derived from its
 * body (`parsed`). `guard` sees each tag (LWW rule 3: any newer tag refuses the whole delete,
 * judged before anything is removed).
 *
 * The tags go first, in as many commits as they need, then the revision (with the last of them);
 * every commit re-reads and checks the revision and tagver, so a tag written meanwhile is seen
 * (tags dropped so far stay dropped). The references go with the revision when they fit, else
 * after it in batches.
 */
export interface RevisionDelete {
  ns: string;
  digest: string;
  parsed: ParsedManifest;
  /**
   * sees each tag the delete removes, by name, before any commit; throws to refuse the delete
   * (replication's LWW, immutable tags)
   */
  guard: (tag: string, t: TagRecord) => void;
  fx: WriteFacts;
  usage?: UsageLedger;
  /**
   * Read afresh for each commit: an entry every commit checks, so a write to it since stops the
   * delete there (the cache cap's pull stamp); it throws to call the delete off.
   */
  unlessChanged?: () => Promise<Deno.KvEntryMaybe<unknown>>;
}

export async function deleteRevision(kv: Deno.Kv, d: RevisionDelete): Promise<void> {
  const derived = referenceMutations(d.ns, d.digest, d.parsed).map((m) => del(m.key));
  const { fx } = d;
  for (;;) {
    const step = await commitWithRetry("manifest delete", () => deleteStep(kv, d, derived));
    if (step === "more") continue;
    fx.landed();
    if (step === "head") await commitInBatches(kv, derived);
    return;
  }
}

/**
 * One commit of a revision delete: the tag deletions that fit, then the head when every tag is
 * in: "more" (tags remain), "head" (the references remain) or "all". It checks the revision and
 * its revtagver: tag writes elsewhere in the namespace do not touch them.
 */
async function deleteStep(
  kv: Deno.Kv,
  d: RevisionDelete,
  derived: PlannedMutation[],
): Promise<{ op: Deno.AtomicOperation; value: "more" | "head" | "all" }> {
  const { ns, digest, parsed, guard, fx, usage } = d;
  fx.attempt();
  const unchanged = d.unlessChanged ? await d.unlessChanged() : null;
  const version = K.revTagVersion(ns, digest);
  const tags: string[] = [];
  const [[rev, tagsVersion]] = await Promise.all([
    kv.getMany<[RevisionRecord, unknown]>([K.rev(ns, digest), version]),
    (async () => {
      for await (const e of kv.list({ prefix: K.tagrevs(ns, digest) }, { batchSize: 500 })) {
        tags.push(e.key[3] as string);
      }
    })(),
  ]);
  if (!rev.value) throw new RegistryError("MANIFEST_UNKNOWN", digest);
  const entries = await getAll<TagRecord>(kv, tags.map((t) => K.tag(ns, t)));
  const tagMuts: PlannedMutation[][] = tags.map((t, i) => {
    const here = entries[i].value?.digest === digest;
    if (here) guard(t, entries[i].value!);
    return here
      ? [del(K.tagrev(ns, digest, t)), del(K.tag(ns, t))]
      : [del(K.tagrev(ns, digest, t))];
  });
  const op = kv.atomic();
  // Room for the revtagver write a commit that leaves the revision in place ends with.
  const k = keySize(version);
  const budget = new CommitBudget({ checks: 0, mutations: 1, keyBytes: k, totalBytes: 2 * k + 8 });
  budget.checkOn(op, rev);
  budget.checkOn(op, tagsVersion);
  if (unchanged) budget.checkOn(op, unchanged);
  // Always rewritten: cached tag lists are validated by its versionstamp.
  budget.addAll(op, [set(K.tagver(ns), true)]);
  let i = 0;
  while (i < tagMuts.length && budget.addAll(op, tagMuts[i])) i++;
  // Tags went and the revision stays: another delete of it that read them must read again.
  const more = () => ({ op: op.set(version, true), value: "more" as const });
  if (i < tagMuts.length) {
    if (i === 0) throw new Error("a tag deletion exceeds KV's commit limits");
    return more();
  }
  const head: PlannedMutation[] = [
    del(K.rev(ns, digest)),
    del(K.sigVerdict(ns, digest)),
    del(version),
  ];
  if (rev.value.body === undefined) head.push(del(K.body(digest, ns)));
  if (parsed.subject) head.push(del(K.referrer(ns, parsed.subject, digest)));
  // The delete's jobs go with the revision's removal: the write the client sees acknowledged.
  head.push(...fx.mutationsFor({ kind: "revision-removed", ns, digest }));
  // The usage change goes with the revision's removal (a head that does not fit the budget
  // moves to the next commit; the usage plan's keys were counted here, harmlessly).
  const plan = await usage?.planRemove(ns, digest, rev.value.size);
  if ((plan && !plan.fits(budget)) || !budget.addAll(op, head)) {
    if (tagMuts.length === 0) throw new Error("a manifest delete exceeds KV's limits");
    fx.attempt(); // the head is not in this commit
    return more();
  }
  plan?.apply(op);
  return { op, value: budget.addAll(op, derived) ? "all" : "head" };
}
