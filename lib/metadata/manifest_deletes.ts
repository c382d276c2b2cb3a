// Manifest deletes as KV commits (manifest_writes.ts tells the plan): a tag's delete, one commit
// checking the tag; a revision's, its tags first in as many commits as they need, then the
// revision, then the references derived from its body, every commit checking the revision and
// its revtagver.
import { type ParsedManifest, RegistryError } from "../oci/mod.ts";
import {
  CommitBudget,
  commitInBatches,
  commitWithRetry,
  getAll,
  K,
  keySize,
  type PlannedMutation,
  type RevisionRecord,
  type TagRecord,
} from "../kv/mod.ts";
import type { UsageLedger } from "./usage.ts";
import type { WriteFacts } from "./write_facts.ts";
import { del, referenceMutations, set } from "./manifest_mutations.ts";

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
