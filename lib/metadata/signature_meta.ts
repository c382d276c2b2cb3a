// Signature verdicts and holds (issue 34) as KV records: read with the revision on every pull of
// a repository with [verify], and changed only by commits that check `sigver/<ns>/<digest>`,
// the one key every signature of the digest and every verdict change rewrites. Judging (the
// crypto) happens before a commit, never inside its retry loop: a commit that finds sigver moved
// answers "stale" and the caller judges again.
//
// A release is one commit: the verdict, the held tags written (each checked, or when there are
// more than the commit's checks, tagver, which every tag change rewrites) and the held-tag and
// expiry records dropped, with the jobs and events the write effects plan for it. HELD_TAGS_MAX
// keeps it inside KV's limits.
import {
  CommitBudget,
  commitWithRetry,
  getAll,
  HELD_TAGS_MAX,
  type HeldTag,
  K,
  KV_LIMITS,
  type PlannedMutation,
  type ReferrerRecord,
  type RevisionRecord,
  type SignatureVerdict,
  type TagRecord,
} from "../kv/mod.ts";
import { eventTime } from "../oci/mod.ts";
import { tagMutations } from "./manifest_writes.ts";
import type { WriteFacts } from "./write_facts.ts";

/** Keys one `getMany` takes (Deno KV's limit). */
const KV_GET_MANY_MAX = 10;

const set = (key: Deno.KvKey, value: unknown): PlannedMutation => ({ kind: "set", key, value });
const del = (key: Deno.KvKey): PlannedMutation => ({ kind: "delete", key });

/** A verdict change, judged while sigver was at `pin`. */
export interface Settle {
  ns: string;
  digest: string;
  pin: string | null;
  /** the verdict to store (`held` set: the image stays or becomes held) */
  next: SignatureVerdict;
  /** a released tag the stored one forbids moving (an immutable tag): false skips it */
  mayMove?: (tag: string, existing: TagRecord | null) => boolean;
  /** events planned with the commit, given what it did */
  events?: (did: SettleOutcome) => PlannedMutation[];
  fx: WriteFacts;
  /** the held tags the judgement saw: read with the verdict when few (one round trip less) */
  expectTags?: string[];
}

export interface SettleOutcome {
  /** the verdict before */
  previous: SignatureVerdict | null;
  /** tags written by a release */
  released: string[];
}

/** The verdict-and-hold entries a push judged by, and what a push writes with its verdict. */
export class SignatureMeta {
  constructor(private readonly kv: Deno.Kv) {}

  /**
   * A judgement's read: the revision, its verdict and the pin (sigver), in one round trip, with
   * up to 7 `tags` of `ns` (a push's: its `.sig` tag, the tags it writes) read beside them.
   */
  async judgement(
    ns: string,
    digest: string,
    tags: string[] = [],
  ): Promise<{
    rev: RevisionRecord | null;
    verdict: SignatureVerdict | null;
    pin: string | null;
    tags: (TagRecord | null)[];
  }> {
    const beside = tags.length <= KV_GET_MANY_MAX - 3 ? tags : [];
    const got = await this.kv.getMany<unknown[]>([
      K.rev(ns, digest),
      K.sigVerdict(ns, digest),
      K.sigVersion(ns, digest),
      ...beside.map((t) => K.tag(ns, t)),
    ]);
    const read = beside.length === tags.length
      ? got.slice(3).map((e) => e.value as TagRecord | null)
      : (await getAll<TagRecord>(this.kv, tags.map((t) => K.tag(ns, t)))).map((e) => e.value);
    return {
      rev: got[0].value as RevisionRecord | null,
      verdict: got[1].value as SignatureVerdict | null,
      pin: got[2].versionstamp,
      tags: read,
    };
  }

  /** The gate's read of a pull: revision and verdict in one round trip. */
  async revisionWithVerdict(
    ns: string,
    digest: string,
  ): Promise<{ rev: RevisionRecord | null; verdict: SignatureVerdict | null }> {
    const [rev, v] = await this.kv.getMany<[RevisionRecord, SignatureVerdict]>([
      K.rev(ns, digest),
      K.sigVerdict(ns, digest),
    ]);
    return { rev: rev.value, verdict: v.value };
  }

  /** A tag and a held tag of that name, in one round trip. */
  async tagWithHeld(
    ns: string,
    tag: string,
  ): Promise<{ tag: TagRecord | null; held: HeldTag | null }> {
    const [t, h] = await this.kv.getMany<[TagRecord, HeldTag]>([
      K.tag(ns, tag),
      K.heldTag(ns, tag),
    ]);
    return { tag: t.value, held: h.value };
  }

  async verdict(ns: string, digest: string): Promise<SignatureVerdict | null> {
    return (await this.kv.get<SignatureVerdict>(K.sigVerdict(ns, digest))).value;
  }

  pinKey(ns: string, digest: string): Deno.KvKey {
    return K.sigVersion(ns, digest);
  }

  /** sigver's versionstamp: what a judgement is pinned to. */
  async pin(ns: string, digest: string): Promise<string | null> {
    return (await this.kv.get(K.sigVersion(ns, digest))).versionstamp;
  }

  /** Tags naming `digest` in `ns`, at most `limit`. */
  async tagsOf(ns: string, digest: string, limit: number): Promise<string[]> {
    const out: string[] = [];
    for await (const e of this.kv.list({ prefix: K.tagrevs(ns, digest) }, { limit })) {
      out.push(e.key[3] as string);
    }
    return out;
  }

  /** The indexes of `ns` naming `child`, at most `limit`. */
  async parentsOf(ns: string, child: string, limit: number): Promise<string[]> {
    const out: string[] = [];
    for await (const e of this.kv.list({ prefix: K.mrefs(ns, child) }, { limit })) {
      out.push(e.key[3] as string);
    }
    return out;
  }

  /** The first `limit` referrers of `subject` in `ns` (bounded: a million referrers cost this). */
  async referrersOf(
    ns: string,
    subject: string,
    limit: number,
  ): Promise<{ digest: string; rec: ReferrerRecord }[]> {
    const out: { digest: string; rec: ReferrerRecord }[] = [];
    const sel = { prefix: K.referrers(ns, subject) };
    for await (const e of this.kv.list<ReferrerRecord>(sel, { limit, batchSize: limit })) {
      out.push({ digest: e.key[3] as string, rec: e.value });
    }
    return out;
  }

  /** Verdicts of many digests of `ns` (an index's children), in getMany rounds. */
  async verdicts(ns: string, digests: string[]): Promise<(SignatureVerdict | null)[]> {
    const es = await getAll<SignatureVerdict>(this.kv, digests.map((d) => K.sigVerdict(ns, d)));
    return es.map((e) => e.value);
  }

  /** Every stored verdict (the trust re-check walks them), from `after` on. */
  async *allVerdicts(
    after: Deno.KvKey | null,
  ): AsyncGenerator<{ key: Deno.KvKey; ns: string; digest: string; verdict: SignatureVerdict }> {
    const selector: Deno.KvListSelector = after
      ? { prefix: K.sigVerdictsAll(), start: [...after, ""] }
      : { prefix: K.sigVerdictsAll() };
    for await (const e of this.kv.list<SignatureVerdict>(selector, { batchSize: 200 })) {
      yield { key: e.key, ns: e.key[1] as string, digest: e.key[2] as string, verdict: e.value };
    }
  }

  /** Holds that ran out by `now`, oldest first, at most `limit`. */
  async dueHolds(
    now: number,
    limit: number,
  ): Promise<{ until: number; ns: string; digest: string }[]> {
    const out: { until: number; ns: string; digest: string }[] = [];
    const end = [...K.holdExpiries(), now + 1];
    for await (const e of this.kv.list({ prefix: K.holdExpiries(), end }, { limit })) {
      out.push({ until: e.key[1] as number, ns: e.key[2] as string, digest: e.key[3] as string });
    }
    return out;
  }

  /**
   * Revisions of the namespaces `judged` picks that have no verdict (pushed while their
   * repository verified nothing), after `after` ([ns, digest]) in key order.
   */
  async *unjudged(
    after: [string, string] | null,
    judged: (ns: string) => boolean,
  ): AsyncGenerator<{ ns: string; digest: string }> {
    const nsSel: Deno.KvListSelector = after
      ? { prefix: K.nsAll(), start: K.ns(after[0]) }
      : { prefix: K.nsAll() };
    for await (const n of this.kv.list(nsSel, { batchSize: 200 })) {
      const ns = n.key[1] as string;
      if (!judged(ns)) continue;
      const revSel: Deno.KvListSelector = after && after[0] === ns
        ? { prefix: K.revs(ns), start: [...K.rev(ns, after[1]), ""] }
        : { prefix: K.revs(ns) };
      let batch: string[] = [];
      const flush = async function* (kv: Deno.Kv, digests: string[]) {
        const vs = await getAll(kv, digests.map((d) => K.sigVerdict(ns, d)));
        for (const [i, v] of vs.entries()) if (!v.value) yield { ns, digest: digests[i] };
      };
      for await (const r of this.kv.list(revSel, { batchSize: 200 })) {
        batch.push(r.key[2] as string);
        if (batch.length === 10) {
          yield* flush(this.kv, batch);
          batch = [];
        }
      }
      yield* flush(this.kv, batch);
    }
  }

  /** Held tags of a deleted image that still name it (one that another push took stays). */
  async dropHeldTags(ns: string, digest: string, tags: string[]): Promise<void> {
    const held = await getAll<HeldTag>(this.kv, tags.map((t) => K.heldTag(ns, t)));
    for (const [i, e] of held.entries()) {
      // one check per commit (KV allows 10): a held push taking the name meanwhile wins
      if (e.value?.digest === digest) {
        await this.kv.atomic().check(e).delete(K.heldTag(ns, tags[i])).commit();
      }
    }
  }

  /** Drops expiry records of a revision no longer there (deleted while held). */
  async forgetExpiry(until: number, ns: string, digest: string): Promise<void> {
    await this.kv.delete(K.holdExpiry(until, ns, digest));
  }

  /**
   * What a push commits with its judged verdict: the verdict, sigver, and for a held image its
   * held tags and expiry record. Static: the push's commit checks sigver (ManifestWrite.pin).
   */
  pushMutations(ns: string, digest: string, v: SignatureVerdict): PlannedMutation[] {
    const out = [set(K.sigVerdict(ns, digest), v), set(K.sigVersion(ns, digest), true)];
    if (v.held) {
      for (const tag of v.held.tags) {
        out.push(
          set(
            K.heldTag(ns, tag),
            {
              digest,
              at: v.held.since,
              pushedBy: v.pushedBy ?? null,
            } satisfies HeldTag,
          ),
        );
      }
      if (!v.held.expired) out.push(set(K.holdExpiry(v.held.until, ns, digest), true));
    }
    return out;
  }

  /** A tag written by a push in a verified repository replaces any held tag of that name. */
  replacedHeldTag(ns: string, tag: string): PlannedMutation[] {
    return [del(K.heldTag(ns, tag))];
  }

  /** Marks `subject` as having a new signature (rides in the signature's own push commit). */
  signatureArrived(ns: string, subject: string): PlannedMutation {
    return set(K.sigVersion(ns, subject), true);
  }

  /**
   * Stores a judged verdict: "stale" when sigver moved since the judgement (judge again),
   * "gone" when the revision is not there, else what it did. A held image judged verified is
   * released in the same commit: its held tags written, unless another push took the name.
   */
  async settle(s: Settle): Promise<"stale" | "gone" | SettleOutcome> {
    const out = await commitWithRetry<"stale" | "gone" | SettleOutcome>(
      "signature verdict",
      async () => {
        const op = this.kv.atomic();
        const did = await this.settleInto(s, op, new CommitBudget());
        if (did === "full") throw new Error("signature verdict exceeds KV limits");
        return typeof did === "string" ? { done: did } : { op, value: did };
      },
    );
    if (typeof out !== "string") s.fx.landed();
    return out;
  }

  /**
   * One attempt of a settle, added to `op` whole or not at all: its reads, its checks (the
   * revision, the pin, the tags a release decides on) and its mutations. "full" (nothing added)
   * when they would not fit beside what `budget` already holds with `spare` checks left over:
   * another commit can carry a settle (a signature's push releasing its subject in its own
   * commit, SignaturePush), and its own tags need those checks.
   */
  async settleInto(
    s: Settle,
    op: Deno.AtomicOperation,
    budget: CommitBudget,
    spare = 0,
  ): Promise<"stale" | "gone" | "full" | SettleOutcome> {
    const { ns, digest, fx } = s;
    fx.attempt();
    // The held tags the judgement saw are read with the rest when few (one round trip).
    const hint = (s.expectTags ?? []).slice(0, HELD_TAGS_MAX);
    const hinted = hint.length > 0 && 4 + 2 * hint.length <= KV_GET_MANY_MAX;
    const got = await this.kv.getMany<unknown[]>([
      K.rev(ns, digest),
      K.sigVerdict(ns, digest),
      K.sigVersion(ns, digest),
      K.tagver(ns),
      ...(hinted ? heldAndTagKeys(ns, hint) : []),
    ]);
    const rev = got[0] as Deno.KvEntryMaybe<RevisionRecord>;
    const pin = got[2];
    if (!rev.value) return "gone";
    if (pin.versionstamp !== s.pin) return "stale";
    const previous = (got[1] as Deno.KvEntryMaybe<SignatureVerdict>).value;
    const checks: Deno.AtomicCheck[] = [rev, pin];
    const muts: PlannedMutation[] = [
      set(K.sigVerdict(ns, digest), s.next),
      set(K.sigVersion(ns, digest), true),
    ];
    const was = previous?.held;
    if (was && !was.expired) muts.push(del(K.holdExpiry(was.until, ns, digest)));
    if (s.next.held && !s.next.held.expired) {
      muts.push(set(K.holdExpiry(s.next.held.until, ns, digest), true));
    }
    const released: string[] = [];
    if (was && !s.next.held && was.tags.length > 0) {
      const tags = was.tags.slice(0, HELD_TAGS_MAX);
      // held tags and tags in one read (getMany rounds of 10), unless read above
      const both = hinted && sameList(tags, hint)
        ? got.slice(4) as Deno.KvEntryMaybe<HeldTag | TagRecord>[]
        : await getAll<HeldTag | TagRecord>(this.kv, heldAndTagKeys(ns, tags));
      const held = both.slice(0, tags.length) as Deno.KvEntryMaybe<HeldTag>[];
      const now = both.slice(tags.length) as Deno.KvEntryMaybe<TagRecord>[];
      // The tags it decides on, each checked as read when they fit beside the revision and
      // the pin (a few, as a rule); more are guarded by tagver, which every tag change
      // rewrites, so only then does a write of another tag conflict with the release.
      const decided = now.filter((_, i) => held[i].value?.digest === digest);
      const room = KV_LIMITS.checks - budget.checks - spare - checks.length;
      if (decided.length <= room) checks.push(...decided);
      else checks.push(got[3]);
      muts.push(set(K.tagver(ns), true));
      const touched = new Set<string>(); // revisions whose revtagver the commit rewrites
      tags.forEach((tag, i) => {
        // Another push took the name since (a verified image, or another held one).
        if (held[i].value?.digest !== digest) return;
        muts.push(del(K.heldTag(ns, tag)));
        const existing = now[i].value;
        if (existing?.digest === digest) return;
        if (s.mayMove && !s.mayMove(tag, existing)) return;
        muts.push(...tagMutations(ns, digest, tag, existing, eventTime(), touched));
        muts.push(
          ...fx.mutationsFor({ kind: "tag-changed", ns, digest, tag, previous: existing }),
        );
        released.push(tag);
      });
    }
    if (was && !s.next.held) {
      muts.push(...fx.mutationsFor({ kind: "image-released", ns, digest, tags: released }));
    }
    const did = { previous, released };
    if (s.events) muts.push(...s.events(did));
    if (!budget.fitsAll(checks.map((c) => c.key), muts, spare)) return "full";
    for (const c of checks) budget.checkOn(op, c);
    budget.addAll(op, muts);
    return did;
  }
}

/** A held tag's key and the tag's, for each of `tags` (held ones first). */
function heldAndTagKeys(ns: string, tags: string[]): Deno.KvKey[] {
  return [...tags.map((t) => K.heldTag(ns, t)), ...tags.map((t) => K.tag(ns, t))];
}

function sameList(a: string[], b: string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
