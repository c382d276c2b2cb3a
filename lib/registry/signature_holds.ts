// Judging a subject again and storing the verdict (a signature of it arrived, trust changed, a
// child or parent was released): a held image that verifies is released in that commit, its tags
// written; an image of an `enforce` repository that does not verify is held.
import { repositoryOf, type VerifyConfig } from "../config/mod.ts";
import { type ParsedManifest, parseManifest, RegistryError } from "../oci/mod.ts";
import type { PlannedMutation, SignatureVerdict } from "../kv/mod.ts";
import type { Alongside, Settle, SettleOutcome } from "../metadata/mod.ts";
import type { SignatureArtifact } from "../signatures/mod.ts";
import { log } from "../log.ts";
import { isArtifact } from "./signature_rules.ts";
import { record, sameVerdict } from "./signature_verdict.ts";
import {
  CHILDREN_JUDGED_MAX,
  type IncomingSignature,
  incomingSignature,
  PARENTS_ASKED,
  type SignatureJudge,
  type SignaturesDeps,
  UPSTREAM_RECHECK_MS,
} from "./signature_judge.ts";

/** A judgement: what was read, and the verdict it comes to. */
interface Decision {
  prev: SignatureVerdict | null;
  pin: string | null;
  parsed: ParsedManifest | null;
  next: SignatureVerdict;
  /** an artifact already judged under this trust: nothing to store */
  kept: boolean;
}

/** A subject judged before its signature's commit, riding in it (ManifestWrite.alongside). */
export interface Prejudged extends Alongside {
  /** after the push (`pushed`: it landed): its events, log and follow-ups, or a fresh judgement */
  finish(pushed: boolean): Promise<void>;
}

/** Verdicts stored, holds taken and released. */
export class SignatureHolds {
  constructor(
    private readonly d: SignaturesDeps,
    private readonly judging: SignatureJudge,
  ) {}

  /**
   * Judges `digest` again (a signature of it arrived, trust changed, a child or parent was
   * released) and stores the verdict; a held image that verifies is released in that commit.
   * Nothing happens when the revision is not there yet (a signature before its image: the
   * image's push finds it).
   */
  async reconsider(
    ns: string,
    digest: string,
    depth = 0,
    fetchUpstream = true,
  ): Promise<SignatureVerdict | null> {
    const cfg = this.judging.policyOf(ns);
    if (!cfg) return null;
    let asked = false;
    if (fetchUpstream && this.d.fetchUpstream) {
      try {
        asked = (await this.d.fetchUpstream(ns, digest)) !== null;
      } catch (e) {
        asked = true;
        // An upstream down is no verdict: judge what is cached.
        log.warn("upstream signatures not fetched", {
          namespace: ns,
          digest,
          error: (e as Error).message,
        });
      }
    }
    for (let round = 0; round < 5; round++) {
      const d = await this.decide(ns, digest, cfg);
      if (!d) return null;
      if (d.kept) return d.prev;
      const { prev, pin, next } = d;
      // Unchanged: nothing written, unless the upstream was asked again (the time it was asked
      // is what keeps the next pull from asking again within UPSTREAM_RECHECK_MS).
      const recent = Date.now() - (prev?.checkedAt ?? 0) < UPSTREAM_RECHECK_MS;
      if (prev && sameVerdict(prev, next) && (!asked || recent)) return prev;
      const released = !!prev?.held && !next.held;
      let planned: PlannedMutation[] = [];
      const out = await this.store(
        ns,
        digest,
        pin,
        next,
        released ? prev!.held!.tags : [],
        () => (planned = this.transitionEvents(ns, digest, prev, next, cfg)),
      );
      if (out === "stale") continue;
      if (out === "gone") return null;
      await this.settled(ns, digest, { ...d, planned, released: out.released }, depth);
      return next;
    }
    log.warn("signature verdict kept changing; left for the next re-check", {
      namespace: ns,
      digest,
    });
    return null;
  }

  /**
   * The verdict `digest` has now: its revision, verdict and pin read, then judged (`incoming`: a
   * signature being pushed, judged with the stored ones). Null when the revision is not there;
   * `kept` when it is an artifact already judged under this trust.
   */
  private async decide(
    ns: string,
    digest: string,
    cfg: VerifyConfig,
    incoming?: IncomingSignature,
  ): Promise<Decision | null> {
    const fingerprint = this.judging.fingerprint(cfg);
    const { rev, verdict: prev, pin } = await this.d.meta.judgement(ns, digest);
    if (!rev) return null;
    let parsed: ParsedManifest | null = null;
    let bytes: Uint8Array | null = null;
    try {
      bytes = await this.d.body(ns, digest, rev);
      parsed = parseManifest(bytes, rev.mediaType);
    } catch (e) {
      if (!(e instanceof RegistryError)) throw e;
    }
    if (prev?.state === "artifact" && prev.fingerprint === fingerprint) {
      return { prev, pin, parsed, next: prev, kept: true };
    }
    let next: SignatureVerdict;
    // An index is an artifact by its tag only (the referrers fallback tag, `sha256-<hex>`).
    const tags = parsed && parsed.children.length > 0
      ? await this.d.meta.tagsOf(ns, digest, 16)
      : [];
    if (parsed && isArtifact(parsed, tags)) {
      next = {
        state: "artifact",
        fingerprint,
        checkedAt: Date.now(),
        signers: [],
      };
    } else {
      const judged = await this.judging.judge(ns, digest, parsed, bytes, cfg, { incoming });
      let via: string | undefined;
      if (!judged.verified && parsed && parsed.children.length === 0) {
        via = (await this.judging.coveringIndex(ns, digest)) ?? undefined;
      }
      next = record(
        via ? { ...judged, verified: true, reason: undefined } : judged,
        fingerprint,
        prev?.pushedBy ?? null,
      );
      if (via) next.via = via;
      if (next.state === "unverified" && cfg.mode === "enforce") {
        const now = Date.now();
        next.held = prev?.held ?? {
          since: now,
          until: now + cfg.holdSecs * 1000,
          tags: [],
          tagCreatedAt: now,
        };
      }
    }
    return { prev, pin, parsed, next, kept: false };
  }

  /**
   * A signature's push judging the image it signs before its own commit, the signature judged
   * as pushed (SignaturePush): the verdict change then rides in the push's commit, so a held
   * image is released in the very commit that stores its signature. Null when there is nothing
   * to judge here: no [verify], a pull-through namespace (its upstream is asked first), no
   * revision yet (the image's push finds the signature), an artifact.
   */
  async prejudge(
    ns: string,
    subject: string,
    incoming: SignatureArtifact,
  ): Promise<Prejudged | null> {
    const cfg = this.judging.policyOf(ns);
    if (!cfg || this.d.mirrored?.(ns)) return null;
    // The signature's own check begins now, beside the reads of what is stored.
    const d = await this.decide(ns, subject, cfg, incomingSignature(subject, incoming, cfg));
    if (!d || d.kept) return null;
    const { prev, next, pin } = d;
    const released = !!prev?.held && !next.held;
    const fx = await this.d.effects.begin({
      kind: "image-release",
      ns,
      digest: subject,
      tags: released ? prev!.held!.tags : [],
    });
    let planned: PlannedMutation[] = [];
    let included = false;
    let outcome: SettleOutcome | null = null;
    let settled = false; // the commit carrying it landed (the push may still fail after it)
    let finished = false;
    const settle: Settle = {
      ns,
      digest: subject,
      pin,
      next,
      fx,
      expectTags: prev?.held?.tags,
      mayMove: (tag, existing) =>
        !existing || existing.digest === subject || !this.d.isImmutable(ns, tag),
      events: () => (planned = this.transitionEvents(ns, subject, prev, next, cfg)),
    };
    return {
      add: async (op, budget, spare) => {
        const did = await this.d.meta.settleInto(settle, op, budget, spare);
        included = typeof did !== "string";
        outcome = included ? did as SettleOutcome : null;
      },
      landed: () => {
        if (!included) return;
        fx.landed();
        settled = true;
      },
      finish: async (pushed) => {
        if (finished) return; // once: a failed push may close it from two places
        finished = true;
        await fx.committed();
        if (!settled || !outcome) {
          // It moved meanwhile (another signature, a delete) or did not fit: judged afresh.
          if (pushed) await this.reconsider(ns, subject);
          return;
        }
        await this.settled(ns, subject, { ...d, planned, released: outcome.released }, 0);
      },
    };
  }

  /** After a verdict change landed: its events woken, metrics, the release logged, follow-ups. */
  private async settled(
    ns: string,
    digest: string,
    s: Decision & { planned: PlannedMutation[]; released: string[] },
    depth: number,
  ): Promise<void> {
    const { prev, next } = s;
    this.d.events.committed(s.planned);
    this.observeTransition(repositoryOf(this.d.cfg, ns).name, prev, next);
    if (prev?.held && !next.held) {
      log.info("held image released: its signature verified", {
        namespace: ns,
        digest,
        tags: s.released.join(","),
      });
    }
    if (next.state === "verified" && prev?.state !== "verified" && depth < 2) {
      await this.afterVerified(ns, digest, s.parsed, depth);
    }
  }

  /**
   * Stores `next` once (the caller judges again on "stale"): the write effects begun for a
   * release of the held tags `releasing` and closed after the commit; a released tag that an
   * immutable tag stands on is left where it is. `events` plans the commit's events.
   */
  async store(
    ns: string,
    digest: string,
    pin: string | null,
    next: SignatureVerdict,
    releasing: string[],
    events?: Settle["events"],
  ): Promise<"stale" | "gone" | SettleOutcome> {
    const fx = await this.d.effects.begin({ kind: "image-release", ns, digest, tags: releasing });
    try {
      return await this.d.meta.settle({
        ns,
        digest,
        pin,
        next,
        fx,
        mayMove: (tag, existing) =>
          !existing || existing.digest === digest || !this.d.isImmutable(ns, tag),
        events,
      });
    } finally {
      await fx.committed();
    }
  }

  /**
   * A newly verified image: the indexes naming it may now meet their platform rule, and an
   * index verified by its own signature covers its held children (bounded).
   */
  private async afterVerified(
    ns: string,
    digest: string,
    parsed: ParsedManifest | null,
    depth: number,
  ): Promise<void> {
    for (
      const parent of await this.d.meta.parentsOf(ns, digest, PARENTS_ASKED)
    ) {
      const v = await this.d.meta.verdict(ns, parent);
      if (v?.state === "unverified") {
        await this.reconsider(
          ns,
          parent,
          depth + 1,
          false,
        );
      }
    }
    if (!parsed || parsed.children.length === 0) return;
    const children = parsed.children.slice(0, CHILDREN_JUDGED_MAX).map((c) => c.digest);
    const verdicts = await this.d.meta.verdicts(ns, children);
    for (const [i, v] of verdicts.entries()) {
      if (v?.state === "unverified") {
        await this.reconsider(ns, children[i], depth + 1, false);
      }
    }
  }

  /** The events of a verdict change (planned into its commit). */
  private transitionEvents(
    ns: string,
    digest: string,
    prev: SignatureVerdict | null,
    next: SignatureVerdict,
    cfg: VerifyConfig,
  ): PlannedMutation[] {
    const out: PlannedMutation[] = [];
    if (next.state === "verified" && prev?.state !== "verified") {
      out.push(...this.judging.plan("image.verified", ns, digest, next, cfg));
    }
    if (prev?.held && !next.held) {
      out.push(...this.judging.plan("image.released", ns, digest, next, cfg));
    }
    if (!prev?.held && next.held) {
      out.push(...this.judging.plan("image.held", ns, digest, next, cfg));
    }
    if (
      next.state === "unverified" && cfg.mode === "warn" &&
      prev?.state !== "unverified"
    ) {
      out.push(...this.judging.plan("image.unverified", ns, digest, next, cfg));
    }
    return out;
  }

  private observeTransition(
    repo: string,
    prev: SignatureVerdict | null,
    next: SignatureVerdict,
  ) {
    if (prev?.state !== next.state) this.d.observe?.verdict(repo, next.state);
    if (prev?.held && !next.held) this.d.observe?.hold(repo, "released");
    if (!prev?.held && next.held) this.d.observe?.hold(repo, "held");
  }
}
