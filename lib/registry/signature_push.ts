// Judging a push before its commit: the verdict, and for an `enforce` repository the hold, ride
// in the push's commit, pinned to what the judgement read (sigver); an artifact's subjects are
// judged again once it landed.
import type { ParsedManifest } from "../oci/mod.ts";
import { repositoryOf } from "../config/mod.ts";
import type { ImageVerdict } from "../signatures/mod.ts";
import { rejectedWrite } from "../oci/mod.ts";
import {
  HELD_TAGS_MAX,
  type PlannedMutation,
  type PusherRecord,
  type SignatureVerdict,
  type TagRecord,
} from "../kv/mod.ts";
import {
  cosignSignatureTag,
  isArtifact,
  referrerFormat,
  signedSubjects,
} from "./signature_rules.ts";
import { type Judged, record, warning } from "./signature_verdict.ts";
import type { SignatureJudge, SignaturesDeps } from "./signature_judge.ts";
import type { Prejudged, SignatureHolds } from "./signature_holds.ts";
import type { SignatureArtifact } from "../signatures/mod.ts";

/** What a push commits for its verdict (Manifests.put hands it to the commit). */
export interface PushPlan {
  /** sigver as the judgement read it; undefined: nothing to pin (an artifact) */
  pin: string | null | undefined;
  /** the tags the push writes now: none while held (they wait in the verdict) */
  tags: string[];
  held: boolean;
  /** why it is held (a Warning on the push's answer) */
  reason?: string;
  head: PlannedMutation[];
  perTag?: (tag: string) => PlannedMutation[];
  /** subjects this artifact signs, judged again once it landed */
  subjects: string[];
  /** the events planned into the commit (woken once it landed) */
  planned: PlannedMutation[];
  observe: () => void;
  /**
   * A signature's subject judged before the commit, its verdict change riding in it (the
   * release happens in the commit that stores the signature); `subjects` is empty then.
   */
  alongside?: Prejudged;
}

/** A push judged, and what follows it. */
export class SignaturePush {
  constructor(
    private readonly d: SignaturesDeps,
    private readonly judging: SignatureJudge,
    private readonly holds: SignatureHolds,
  ) {}

  /** The key a push's commit checks: what its judgement is pinned to. */
  pinKey(ns: string, digest: string): Deno.KvKey {
    return this.d.meta.pinKey(ns, digest);
  }

  /**
   * Judges a push before its commit. Null when the repository verifies nothing. A push into an
   * `enforce` repository that does not verify keeps its tags in its verdict (held): they are
   * written when its signature arrives.
   */
  async planPush(p: {
    ns: string;
    digest: string;
    parsed: ParsedManifest;
    bytes: Uint8Array;
    tags: string[];
    pusher: PusherRecord | null;
    guard: (tag: string, existing: TagRecord | null) => void;
  }): Promise<PushPlan | null> {
    const cfg = this.judging.policyOf(p.ns);
    if (!cfg) return null;
    const { ns, digest } = p;
    const repo = repositoryOf(this.d.cfg, ns).name;
    const fingerprint = this.judging.fingerprint(cfg);
    const now = Date.now();
    if (isArtifact(p.parsed, p.tags)) {
      // Its verdict is its kind, whatever else lands: nothing to read, nothing to pin.
      const v: SignatureVerdict = {
        state: "artifact",
        fingerprint,
        checkedAt: now,
        signers: [],
      };
      let subjects = signedSubjects(p.parsed, p.tags);
      // One subject (a `.sig` tag, a referrer: the rule) is judged now, with this signature as
      // pushed, and settled in this push's commit: no second commit after it.
      let alongside: Prejudged | undefined;
      const incoming = subjects.length === 1 ? this.incoming(p, subjects[0]) : null;
      if (incoming) {
        alongside = await this.holds.prejudge(ns, subjects[0], incoming) ?? undefined;
        if (alongside) subjects = [];
      }
      return {
        alongside,
        pin: undefined,
        tags: p.tags,
        held: false,
        head: [
          ...this.d.meta.pushMutations(ns, digest, v),
          ...subjects.map((s) => this.d.meta.signatureArrived(ns, s)),
        ],
        perTag: (t) => this.d.meta.replacedHeldTag(ns, t),
        subjects,
        planned: [],
        observe: () => this.d.observe?.verdict(repo, "artifact"),
      };
    }
    // The `.sig` tag the judgement looks for and the tags this push writes, read with it.
    const sigTag = cosignSignatureTag(digest);
    const named = [...(sigTag ? [sigTag] : []), ...p.tags];
    const { rev, verdict: previous, pin, tags: read } = await this.d.meta.judgement(
      ns,
      digest,
      named,
    );
    const stored = new Map(named.map((t, i) => [t, read[i]]));
    const before = rev ? previous : null;
    const reuse = before && before.fingerprint === fingerprint &&
      before.state === "verified";
    const judged: Judged = reuse
      ? {
        verified: true,
        signers: before!.signers as ImageVerdict["signers"],
        checkedAt: before!.checkedAt,
        byPlatforms: before!.byPlatforms,
      }
      : await this.judging.judge(ns, digest, p.parsed, p.bytes, cfg, {
        sigTag: sigTag ? stored.get(sigTag) ?? null : undefined,
      });
    const holds = !judged.verified && cfg.mode === "enforce";
    const v = record(judged, fingerprint, before?.pushedBy ?? p.pusher);
    if (reuse && before!.via) v.via = before!.via;
    let planned: PlannedMutation[] = [];
    if (holds) {
      const tags = [...new Set([...(before?.held?.tags ?? []), ...p.tags])];
      if (tags.length > HELD_TAGS_MAX) {
        throw rejectedWrite(
          `${digest} waits for its signature and would keep ${tags.length} tags; at most ` +
            `${HELD_TAGS_MAX} wait with a held image: push its signature first`,
        );
      }
      // A tag it could never take is refused now, not when the signature arrives.
      for (const t of p.tags) p.guard(t, stored.get(t) ?? null);
      v.pushedBy = before?.held ? before.pushedBy ?? p.pusher : p.pusher;
      v.held = {
        since: before?.held?.since ?? now,
        until: before?.held?.until ?? now + cfg.holdSecs * 1000,
        tags,
        tagCreatedAt: now,
      };
      if (before?.held?.expired) v.held.expired = true;
      if (!before?.held) planned = this.judging.plan("image.held", ns, digest, v, cfg);
    } else if (!reuse) {
      planned = this.judging.plan(
        judged.verified ? "image.verified" : "image.unverified",
        ns,
        digest,
        v,
        cfg,
      );
    }
    return {
      pin,
      tags: holds ? [] : p.tags,
      held: holds,
      reason: holds ? warning(`held: ${v.reason ?? "not signed"}`) : undefined,
      head: [...this.d.meta.pushMutations(ns, digest, v), ...planned],
      perTag: (t) => this.d.meta.replacedHeldTag(ns, t),
      subjects: [],
      planned,
      observe: () => {
        if (!reuse) {
          this.d.observe?.verdict(
            repo,
            judged.verified ? "verified" : "unverified",
          );
        }
        if (holds && !before?.held) this.d.observe?.hold(repo, "held");
      },
    };
  }

  /** The signature a push carries for `subject`, as the engine reads it (null: none it knows). */
  private incoming(
    p: { ns: string; digest: string; parsed: ParsedManifest; bytes: Uint8Array; tags: string[] },
    subject: string,
  ): SignatureArtifact | null {
    const sigTag = cosignSignatureTag(subject);
    const format = sigTag && p.tags.includes(sigTag)
      ? "cosign-tag"
      : p.parsed.subject === subject
      ? referrerFormat(p.parsed.artifactType, p.parsed.mediaType)
      : null;
    if (!format) return null;
    return {
      format,
      digest: p.digest,
      manifest: p.bytes,
      readBlob: (d, max) => this.d.blob(p.ns, d, max),
    };
  }

  /** After a push landed: its events woken, and the subjects an artifact signs judged again. */
  async afterPush(ns: string, plan: PushPlan): Promise<void> {
    this.d.events.committed(plan.planned);
    plan.observe();
    await plan.alongside?.finish(true);
    for (const s of plan.subjects) await this.holds.reconsider(ns, s);
  }
}
