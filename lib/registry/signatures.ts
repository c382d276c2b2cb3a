// Verified before visible (issue 34): the registry's side of signature verification. The engine
// (lib/signatures) turns artifacts into a verdict; this finds the artifacts a subject has here
// (its cosign `.sig` tag, its sigstore and notation referrers: bounded), judges a push before
// its commit (the verdict, and for an `enforce` repository the hold, ride in the push's commit),
// re-judges a subject when one of its signatures arrives (a release is one commit with the tags
// becoming visible), and answers the pull gate from the verdict stored beside the revision.
//
// Crypto runs on the push path, outside any KV retry loop: a commit whose pin (sigver) moved
// meanwhile sends the caller back to judge again. Pulls never verify: they read the verdict.
import { type Config, repositoryOf, type VerifyConfig } from "../config/mod.ts";
import {
  type ImageVerdict,
  indexVerdict,
  type PlatformVerdict,
  type SignatureArtifact,
  type SignatureFormat,
  trustFingerprint,
  verifySubject,
} from "../signatures/mod.ts";
import {
  isValidTag,
  parseDigest,
  type ParsedManifest,
  parseManifest,
  RegistryError,
  truncate,
} from "../oci/mod.ts";
import {
  HELD_TAGS_MAX,
  type PlannedMutation,
  type PusherRecord,
  type RevisionRecord,
  type SignatureVerdict,
  type StoredSigner,
  type TagRecord,
} from "../kv/mod.ts";
import { type ManifestMeta, type SignatureMeta } from "../metadata/mod.ts";
import type { WriteEffects } from "../effects/mod.ts";
import type { Events } from "../events/mod.ts";
import type { EventKind } from "../config/mod.ts";
import { log } from "../log.ts";
import type { RowSignature } from "./svc_listings.ts";
import {
  cosignSignatureTag,
  isArtifact,
  isIndex,
  isPusher,
  platformString,
  referrerFormat,
  signedSubjects,
  type Viewer,
} from "./signature_rules.ts";

/** Signature artifacts judged per subject: the `.sig` tag and the first referrers of a kind. */
export const ARTIFACTS_MAX = 16;
/** Referrers of a subject looked through for signatures (a million referrers cost this). */
export const REFERRERS_SCANNED = 256;
/** Children of an index whose verdicts the platform rule reads. */
export const CHILDREN_JUDGED_MAX = 256;
/** Indexes of a child asked whether their signature covers it. */
const PARENTS_ASKED = 8;
const SIGNERS_KEPT = 16;
/** An unverified pull-through image asks its upstream for signatures again after this. */
const UPSTREAM_RECHECK_MS = 60_000;
const TEXT_KEPT = 512;

/** Metrics of verdicts and holds (lib/metrics), by repository. */
export interface SignatureObserver {
  verdict(
    repository: string,
    result: "verified" | "unverified" | "artifact",
  ): void;
  hold(
    repository: string,
    event: "held" | "released" | "rejected" | "kept" | "denied",
  ): void;
  /** wall time of one subject's verification */
  verifySeconds(seconds: number): void;
}

export interface SignaturesDeps {
  cfg: Config;
  meta: SignatureMeta;
  manifests: Pick<ManifestMeta, "tag" | "revision">;
  /** a manifest body, checked against its digest */
  body: (
    ns: string,
    digest: string,
    rev: RevisionRecord,
  ) => Promise<Uint8Array>;
  /** a blob `ns` links, refused past `maxBytes` */
  blob: (ns: string, digest: string, maxBytes: number) => Promise<Uint8Array>;
  events: Events;
  effects: WriteEffects;
  isImmutable: (ns: string, tag: string) => boolean;
  /**
   * Before judging an image of a pull-through namespace: its upstream's signatures fetched and
   * stored beside it (null: a hosted namespace, nothing to fetch)
   */
  fetchUpstream?: (ns: string, digest: string) => Promise<unknown> | null;
  /** a DELETE by digest (on_expiry = "delete") */
  deleteImage: (ns: string, digest: string) => Promise<void>;
  observe?: SignatureObserver;
}

/** What one sweep did (lib/services schedules it). */
export interface SweepSummary {
  expired: number;
  rejected: number;
  rechecked: number;
  /** the trust re-check has more to do */
  more: boolean;
}

/** Holds handled per sweep; verdicts judged again per sweep; keys walked per sweep. */
const EXPIRIES_PER_SWEEP = 100;
const RECHECKS_PER_SWEEP = 100;
const KEYS_PER_SWEEP = 5000;

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
}

export interface SignatureStatus {
  namespace: string;
  digest: string;
  mode: "off" | "warn" | "enforce";
  state: "verified" | "unverified" | "artifact" | "unjudged";
  verified: boolean;
  held: boolean;
  reason: string | null;
  checked_at: string | null;
  /** the verdict was made under the trust configured now */
  current: boolean;
  via: string | null;
  /** an index verified through its platforms' own signatures */
  by_platforms: boolean;
  hold:
    | { since: string; until: string; expired: boolean; tags: string[] }
    | null;
  signers: StoredSigner[];
}

/** An image's verdict as CEL rules read it (`image`; lib/policy PolicyImage has this shape). */
export interface ImageFacts {
  digest: string;
  verified: boolean;
  state: string;
  held: boolean;
  signers: string[];
}

export class Signatures {
  /** the trust re-check walk: the fingerprints it works toward, and where it is */
  #walk: {
    goal: string | null;
    phase: "verdicts" | "unjudged" | "done";
    after: unknown;
  } = {
    goal: null, // never walked: the first sweep walks whatever the trust is
    phase: "done",
    after: null,
  };
  readonly #fingerprints = new WeakMap<VerifyConfig, string>();

  constructor(private readonly d: SignaturesDeps) {}

  /** The revisions listing's signature column: null where the repository verifies nothing. */
  async rowStates(
    ns: string,
    digests: string[],
  ): Promise<RowSignature[] | null> {
    const cfg = this.policyOf(ns);
    if (!cfg) return null;
    const vs = await this.d.meta.verdicts(ns, digests);
    return vs.map((v) => ({
      state: !v
        ? "unjudged"
        : v.state === "unverified" && cfg.mode === "enforce" && v.held
        ? "held"
        : v.state,
      heldTags: cfg.mode === "enforce" ? v?.held?.tags ?? [] : [],
    }));
  }

  /** Whether `ns@digest` is held now (replication sends nothing held). */
  async isHeld(ns: string, digest: string): Promise<boolean> {
    const cfg = this.policyOf(ns);
    if (cfg?.mode !== "enforce") return false;
    const v = await this.d.meta.verdict(ns, digest);
    return !!v?.held;
  }

  /** The trust fingerprint of a repository's [verify], computed once per loaded config. */
  fingerprint(cfg: VerifyConfig): string {
    let fp = this.#fingerprints.get(cfg);
    if (fp === undefined) {
      this.#fingerprints.set(cfg, fp = trustFingerprint(cfg));
    }
    return fp;
  }

  /**
   * One bounded background pass: holds that ran out (on_expiry), then — once per change of
   * the configured trust (startup, a reload) — every stored verdict made under other trust and
   * every revision never judged, judged again; images that verified only through a removed key
   * are held again. Bounded per call (EXPIRIES_PER_SWEEP, RECHECKS_PER_SWEEP, KEYS_PER_SWEEP);
   * the next call goes on where this one stopped.
   */
  async sweep(now = Date.now()): Promise<SweepSummary> {
    const out: SweepSummary = {
      expired: 0,
      rejected: 0,
      rechecked: 0,
      more: false,
    };
    const goal = this.trustGoal();
    // Nothing verifies, and the walk since that became so is done (it showed what was held):
    // no hold can be due, nothing is to judge. A registry without [verify] pays nothing here.
    if (goal === "" && this.#walk.goal === "" && this.#walk.phase === "done") return out;
    for (const due of await this.d.meta.dueHolds(now, EXPIRIES_PER_SWEEP)) {
      const r = await this.expire(due.until, due.ns, due.digest);
      if (r === "rejected") out.rejected++;
      else if (r === "kept") out.expired++;
    }
    if (goal !== this.#walk.goal) {
      this.#walk = { goal, phase: "verdicts", after: null };
    }
    let keys = 0;
    if (this.#walk.phase === "verdicts") {
      for await (
        const e of this.d.meta.allVerdicts(
          this.#walk.after as Deno.KvKey | null,
        )
      ) {
        this.#walk.after = e.key;
        const cfg = this.policyOf(e.ns);
        if (cfg && e.verdict.fingerprint !== this.fingerprint(cfg)) {
          await this.reconsider(e.ns, e.digest);
          out.rechecked++;
        } else if (!cfg && e.verdict.held) {
          // The repository verifies nothing any more: what waited is shown, tags and all.
          await this.unhold(e.ns, e.digest);
          out.rechecked++;
        }
        if (++keys >= KEYS_PER_SWEEP || out.rechecked >= RECHECKS_PER_SWEEP) {
          return { ...out, more: true };
        }
      }
      // With nothing verifying there is no revision to judge (the walk would list them all).
      this.#walk = { goal, phase: goal === "" ? "done" : "unjudged", after: null };
    }
    if (this.#walk.phase === "unjudged") {
      const after = this.#walk.after as [string, string] | null;
      for await (
        const r of this.d.meta.unjudged(
          after,
          (ns) => this.policyOf(ns) !== null,
        )
      ) {
        this.#walk.after = [r.ns, r.digest];
        await this.reconsider(r.ns, r.digest);
        out.rechecked++;
        if (out.rechecked >= RECHECKS_PER_SWEEP) return { ...out, more: true };
      }
      this.#walk = { goal, phase: "done", after: null };
    }
    return out;
  }

  /** The configured trust of every verifying repository, as one string (what a walk is for). */
  private trustGoal(): string {
    const parts: string[] = [];
    for (const rc of this.d.cfg.repositories.values()) {
      if (rc.verify && rc.verify.mode !== "off") {
        parts.push(
          `${rc.name}=${rc.verify.mode}:${this.fingerprint(rc.verify)}`,
        );
      }
    }
    return parts.sort().join("\n");
  }

  /**
   * A hold that ran out: judged once more (a signature may have landed while its re-judgement
   * was lost to a crash), then deleted (image.rejected) or kept held (image.held, expired).
   */
  private async expire(
    until: number,
    ns: string,
    digest: string,
  ): Promise<"released" | "rejected" | "kept" | "gone"> {
    const cfg = this.policyOf(ns);
    if (!cfg) {
      await this.unhold(ns, digest);
      await this.d.meta.forgetExpiry(until, ns, digest);
      return "released";
    }
    const v = await this.reconsider(ns, digest);
    if (!v?.held || v.held.expired || v.held.until !== until) {
      await this.d.meta.forgetExpiry(until, ns, digest);
      return v && !v.held ? "released" : "gone";
    }
    const repo = repositoryOf(this.d.cfg, ns).name;
    if (cfg.onExpiry === "delete") {
      try {
        await this.d.deleteImage(ns, digest);
      } catch (e) {
        // An immutable tag (an image held again after a trust change) keeps it: held.
        if (!(e instanceof RegistryError) || e.code === "INTERNAL_ERROR") {
          throw e;
        }
        log.warn("held image not deleted when its hold ran out", {
          namespace: ns,
          digest,
          error: e.detail,
        });
        return await this.keep(until, ns, digest, cfg);
      }
      await this.d.meta.forgetExpiry(until, ns, digest);
      await this.d.meta.dropHeldTags(ns, digest, v.held.tags);
      if (this.d.events.wanted("image.rejected", ns)) {
        const e = this.d.events;
        const ev = e.event("image.rejected", {
          namespace: ns,
          digest,
          reference: digest,
        });
        ev.signature = {
          mode: cfg.mode,
          verified: false,
          reason: v.reason ?? null,
          signers: [],
          held_tags: v.held.tags,
          expired: true,
        };
        await e.emit(ev);
      }
      this.d.observe?.hold(repo, "rejected");
      log.info(
        "held image deleted: its hold ran out without a valid signature",
        {
          namespace: ns,
          digest,
          reason: v.reason ?? "",
        },
      );
      return "rejected";
    }
    return await this.keep(until, ns, digest, cfg);
  }

  /**
   * A held image of a repository whose [verify] was turned off (or removed): released without
   * a verdict, its waiting tags written, as a push there would now write them.
   */
  private async unhold(ns: string, digest: string): Promise<void> {
    for (let round = 0; round < 5; round++) {
      const { rev, verdict: cur, pin } = await this.d.meta.judgement(ns, digest);
      if (!rev || !cur?.held) return;
      const next: SignatureVerdict = { ...cur };
      delete next.held;
      const fx = await this.d.effects.begin({
        kind: "image-release",
        ns,
        digest,
        tags: cur.held.tags,
      });
      let out;
      try {
        out = await this.d.meta.settle({
          ns,
          digest,
          pin,
          next,
          fx,
          mayMove: (tag, existing) =>
            !existing || existing.digest === digest || !this.d.isImmutable(ns, tag),
        });
      } finally {
        await fx.committed();
      }
      if (out !== "stale") return;
    }
  }

  /** on_expiry = "keep": the image stays held, its expiry noted (no further expiry). */
  private async keep(
    until: number,
    ns: string,
    digest: string,
    cfg: VerifyConfig,
  ): Promise<"kept" | "gone"> {
    for (let round = 0; round < 5; round++) {
      const pin = await this.d.meta.pin(ns, digest);
      const cur = await this.d.meta.verdict(ns, digest);
      if (!cur?.held || cur.held.until !== until) return "gone";
      const next: SignatureVerdict = {
        ...cur,
        held: { ...cur.held, expired: true },
      };
      const fx = await this.d.effects.begin({
        kind: "image-release",
        ns,
        digest,
        tags: [],
      });
      let planned: PlannedMutation[] = [];
      let out;
      try {
        out = await this.d.meta.settle({
          ns,
          digest,
          pin,
          next,
          fx,
          events: () => (planned = this.plan("image.held", ns, digest, next, cfg, {
            expired: true,
          })),
        });
      } finally {
        await fx.committed();
      }
      if (out === "stale") continue;
      if (out === "gone") return "gone";
      this.d.events.committed(planned);
      this.d.observe?.hold(repositoryOf(this.d.cfg, ns).name, "kept");
      log.info(
        "held image kept held: its hold ran out without a valid signature",
        {
          namespace: ns,
          digest,
        },
      );
      return "kept";
    }
    return "gone";
  }

  /** The key a push's commit checks: what its judgement is pinned to. */
  pinKey(ns: string, digest: string): Deno.KvKey {
    return this.d.meta.pinKey(ns, digest);
  }

  /** The repository's [verify] when it verifies anything (mode warn or enforce). */
  policyOf(ns: string): VerifyConfig | null {
    const v = repositoryOf(this.d.cfg, ns).verify;
    return v && v.mode !== "off" ? v : null;
  }

  /** Every signature artifact `digest` has in `ns`, bounded (ARTIFACTS_MAX, REFERRERS_SCANNED). */
  async artifactsOf(ns: string, digest: string): Promise<SignatureArtifact[]> {
    const blob = (d: string, max: number) => this.d.blob(ns, d, max);
    const sigTag = cosignSignatureTag(digest);
    // The `.sig` tag and the referrers are looked up at once (two KV reads in flight).
    const [tagged, referrers] = await Promise.all([
      sigTag ? this.d.manifests.tag(ns, sigTag) : null,
      this.d.meta.referrersOf(ns, digest, REFERRERS_SCANNED),
    ]);
    const wanted: { format: SignatureFormat; digest: string }[] = [];
    if (tagged) wanted.push({ format: "cosign-tag", digest: tagged.digest });
    for (const r of referrers) {
      if (wanted.length >= ARTIFACTS_MAX) break;
      const format = referrerFormat(r.rec.artifactType, r.rec.mediaType);
      if (format) wanted.push({ format, digest: r.digest });
    }
    const found = await Promise.all(wanted.map(async (w) => {
      const rev = await this.d.manifests.revision(ns, w.digest);
      if (!rev) return null;
      const manifest = await this.d.body(ns, w.digest, rev);
      return { format: w.format, digest: w.digest, manifest, readBlob: blob };
    }));
    return found.filter((a) => a !== null);
  }

  /**
   * The verdict of `digest` in `ns` from its own signatures and, for an index that is not
   * signed itself, the platform rule over its children's stored verdicts (lib/signatures
   * indexVerdict). `bytes`: the subject's manifest (a bundle's message signature signs it).
   */
  async judge(
    ns: string,
    digest: string,
    parsed: ParsedManifest | null,
    bytes: Uint8Array | null,
    cfg: VerifyConfig,
  ): Promise<Judged> {
    const started = performance.now();
    let own: ImageVerdict;
    try {
      const artifacts = await this.artifactsOf(ns, digest);
      own = await verifySubject(digest, artifacts, cfg, new Date(), {
        subjectManifest: bytes ?? undefined,
      });
    } catch (e) {
      // A broken artifact is a verdict about content (not a machine failure): not verified.
      own = {
        verified: false,
        signers: [],
        reason: `signatures of ${digest} could not be checked: ${(e as Error).message}`,
        checkedAt: Date.now(),
      };
    } finally {
      this.d.observe?.verifySeconds((performance.now() - started) / 1000);
    }
    if (own.verified || !parsed || parsed.children.length === 0) return own;
    if (parsed.children.length > CHILDREN_JUDGED_MAX) {
      return {
        ...own,
        reason: `${own.reason ?? `no valid signature for ${digest}`}; the index names more ` +
          `than ${CHILDREN_JUDGED_MAX} manifests: sign the index itself`,
      };
    }
    const verdicts = await this.d.meta.verdicts(
      ns,
      parsed.children.map((c) => c.digest),
    );
    const children: PlatformVerdict[] = parsed.children.map((c, i) => ({
      platform: platformString(c.platform) ?? "unknown/unknown",
      digest: c.digest,
      verdict: {
        verified: verdicts[i]?.state === "verified",
        signers: (verdicts[i]?.signers ?? []) as ImageVerdict["signers"],
        checkedAt: verdicts[i]?.checkedAt ?? own.checkedAt,
      },
    }));
    const v = indexVerdict(digest, own, children, cfg);
    return v.verified ? { ...v, byPlatforms: true } : v;
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
    const cfg = this.policyOf(p.ns);
    if (!cfg) return null;
    const { ns, digest } = p;
    const repo = repositoryOf(this.d.cfg, ns).name;
    const fingerprint = this.fingerprint(cfg);
    const now = Date.now();
    if (isArtifact(p.parsed, p.tags)) {
      // Its verdict is its kind, whatever else lands: nothing to read, nothing to pin.
      const v: SignatureVerdict = {
        state: "artifact",
        fingerprint,
        checkedAt: now,
        signers: [],
      };
      const subjects = signedSubjects(p.parsed, p.tags);
      return {
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
    const { rev, verdict: previous, pin } = await this.d.meta.judgement(ns, digest);
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
      : await this.judge(ns, digest, p.parsed, p.bytes, cfg);
    const holds = !judged.verified && cfg.mode === "enforce";
    const v = record(judged, fingerprint, before?.pushedBy ?? p.pusher);
    if (reuse && before!.via) v.via = before!.via;
    let planned: PlannedMutation[] = [];
    if (holds) {
      const tags = [...new Set([...(before?.held?.tags ?? []), ...p.tags])];
      if (tags.length > HELD_TAGS_MAX) {
        throw new RegistryError(
          "DENIED",
          `${digest} waits for its signature and would keep ${tags.length} tags; at most ` +
            `${HELD_TAGS_MAX} wait with a held image: push its signature first`,
          { status: 409 },
        );
      }
      // A tag it could never take is refused now, not when the signature arrives.
      for (const t of p.tags) p.guard(t, await this.d.manifests.tag(ns, t));
      v.pushedBy = before?.held ? before.pushedBy ?? p.pusher : p.pusher;
      v.held = {
        since: before?.held?.since ?? now,
        until: before?.held?.until ?? now + cfg.holdSecs * 1000,
        tags,
        tagCreatedAt: now,
      };
      if (before?.held?.expired) v.held.expired = true;
      if (!before?.held) planned = this.plan("image.held", ns, digest, v, cfg);
    } else if (!reuse) {
      planned = this.plan(
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

  /** After a push landed: its events woken, and the subjects an artifact signs judged again. */
  async afterPush(ns: string, plan: PushPlan): Promise<void> {
    this.d.events.committed(plan.planned);
    plan.observe();
    for (const s of plan.subjects) await this.reconsider(ns, s);
  }

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
    const cfg = this.policyOf(ns);
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
    const repo = repositoryOf(this.d.cfg, ns).name;
    const fingerprint = this.fingerprint(cfg);
    for (let round = 0; round < 5; round++) {
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
        return prev;
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
        const judged = await this.judge(ns, digest, parsed, bytes, cfg);
        let via: string | undefined;
        if (!judged.verified && parsed && parsed.children.length === 0) {
          via = (await this.coveringIndex(ns, digest)) ?? undefined;
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
      // Unchanged: nothing written, unless the upstream was asked again (the time it was asked
      // is what keeps the next pull from asking again within UPSTREAM_RECHECK_MS).
      const recent = Date.now() - (prev?.checkedAt ?? 0) < UPSTREAM_RECHECK_MS;
      if (prev && sameVerdict(prev, next) && (!asked || recent)) return prev;
      const released = !!prev?.held && !next.held;
      const fx = await this.d.effects.begin({
        kind: "image-release",
        ns,
        digest,
        tags: released ? prev!.held!.tags : [],
      });
      let planned: PlannedMutation[] = [];
      let out;
      try {
        out = await this.d.meta.settle({
          ns,
          digest,
          pin,
          next,
          fx,
          mayMove: (tag, existing) =>
            !existing || existing.digest === digest ||
            !this.d.isImmutable(ns, tag),
          events: () => (planned = this.transitionEvents(
            ns,
            digest,
            prev,
            next,
            cfg,
          )),
        });
      } finally {
        await fx.committed();
      }
      if (out === "stale") continue;
      if (out === "gone") return null;
      this.d.events.committed(planned);
      this.observeTransition(repo, prev, next);
      if (released) {
        log.info("held image released: its signature verified", {
          namespace: ns,
          digest,
          tags: out.released.join(","),
        });
      }
      if (
        next.state === "verified" && prev?.state !== "verified" && depth < 2
      ) {
        await this.afterVerified(ns, digest, parsed, depth);
      }
      return next;
    }
    log.warn("signature verdict kept changing; left for the next re-check", {
      namespace: ns,
      digest,
    });
    return null;
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

  /** An index of `ns` naming `child` that is verified by a signature of its own, if any. */
  async coveringIndex(ns: string, child: string): Promise<string | null> {
    for (
      const parent of await this.d.meta.parentsOf(ns, child, PARENTS_ASKED)
    ) {
      const v = await this.d.meta.verdict(ns, parent);
      if (v?.state === "verified" && !v.via && !v.byPlatforms) return parent;
    }
    return null;
  }

  /**
   * The pull gate: the revision `reference` names for `viewer` (a held tag resolves for its
   * pusher and roles granted get-held), its verdict, and whether it is served. Throws DENIED
   * (403) naming what is missing for anyone else.
   */
  async gate(
    ns: string,
    reference: string,
    viewer: Viewer | null,
    cfg: VerifyConfig,
  ): Promise<{ digest: string; rev: RevisionRecord; warning?: string }> {
    let digest = reference;
    if (!reference.includes(":")) {
      const { tag, held } = await this.d.meta.tagWithHeld(ns, reference);
      if (held && this.sees(viewer, held.pushedBy, ns, held.digest)) {
        digest = held.digest;
      } else if (tag) digest = tag.digest;
      else if (held) {
        const v = await this.d.meta.verdict(ns, held.digest);
        if (v?.held) {
          throw denied(ns, held.digest, v, `tag ${truncate(reference)} `);
        }
        throw new RegistryError(
          "MANIFEST_UNKNOWN",
          `${truncate(ns)}:${truncate(reference)}`,
        );
      } else {
        throw new RegistryError(
          "MANIFEST_UNKNOWN",
          `${truncate(ns)}:${truncate(reference)}`,
        );
      }
    }
    const { rev, verdict } = await this.d.meta.revisionWithVerdict(ns, digest);
    if (!rev) {
      throw new RegistryError(
        "MANIFEST_UNKNOWN",
        `${truncate(ns)}@${truncate(reference)}`,
      );
    }
    if (verdict?.state === "verified" || verdict?.state === "artifact") {
      return { digest, rev };
    }
    const reason = verdict?.reason ?? `${digest} has not been verified yet`;
    if (cfg.mode === "warn") {
      return { digest, rev, warning: warning(`unsigned: ${reason}`) };
    }
    if (this.sees(viewer, verdict?.pushedBy ?? null, ns, digest)) {
      return { digest, rev, warning: warning(`held: ${reason}`) };
    }
    // A platform manifest an index's own signature covers is served with that index.
    if (
      !isIndex(rev.mediaType) && (await this.coveringIndex(ns, digest)) !== null
    ) {
      return { digest, rev };
    }
    this.d.observe?.hold(repositoryOf(this.d.cfg, ns).name, "denied");
    throw denied(ns, digest, verdict, "");
  }

  /**
   * The gate for a manifest already resolved (pull-through): served, warned or refused. A
   * cached image never judged (just fetched, or cached before [verify]) is judged now, its
   * upstream signatures fetched first; an unverified one is judged again at most once a minute
   * (the upstream may have signed it since).
   */
  async gateDigest(
    ns: string,
    digest: string,
    viewer: Viewer | null,
    cfg: VerifyConfig,
  ): Promise<string | undefined> {
    let verdict = await this.d.meta.verdict(ns, digest);
    if (
      !verdict || verdict.fingerprint !== this.fingerprint(cfg) ||
      (verdict.state === "unverified" &&
        Date.now() - verdict.checkedAt > UPSTREAM_RECHECK_MS)
    ) {
      verdict = (await this.reconsider(ns, digest)) ?? verdict;
    }
    if (verdict?.state === "verified" || verdict?.state === "artifact") {
      return undefined;
    }
    const reason = verdict?.reason ?? `${digest} has not been verified yet`;
    if (cfg.mode === "warn") return warning(`unsigned: ${reason}`);
    if (this.sees(viewer, verdict?.pushedBy ?? null, ns, digest)) {
      return warning(`held: ${reason}`);
    }
    this.d.observe?.hold(repositoryOf(this.d.cfg, ns).name, "denied");
    throw denied(ns, digest, verdict, "");
  }

  private sees(
    viewer: Viewer | null,
    by: PusherRecord | null | undefined,
    ns: string,
    digest: string,
  ): boolean {
    if (!viewer) return false;
    return isPusher(by, viewer.identity) || viewer.mayViewHeld(ns, digest);
  }

  /** `GET /v2/<ns>/_svc/signatures/<reference>`: who signed, with what, verified when, why not. */
  async status(
    ns: string,
    reference: string,
    viewer: Viewer | null,
  ): Promise<SignatureStatus> {
    const cfg = repositoryOf(this.d.cfg, ns).verify ?? null;
    let digest = reference;
    if (!reference.includes(":")) {
      const { tag, held } = await this.d.meta.tagWithHeld(ns, reference);
      if (held && (this.sees(viewer, held.pushedBy, ns, held.digest) || !tag)) {
        digest = held.digest;
      } else if (tag) digest = tag.digest;
      else {throw new RegistryError(
          "MANIFEST_UNKNOWN",
          `${truncate(ns)}:${truncate(reference)}`,
        );}
    }
    const { rev, verdict } = await this.d.meta.revisionWithVerdict(ns, digest);
    if (!rev) {
      throw new RegistryError(
        "MANIFEST_UNKNOWN",
        `${truncate(ns)}@${truncate(reference)}`,
      );
    }
    const mode = cfg?.mode ?? "off";
    const current = !!cfg && !!verdict &&
      verdict.fingerprint === this.fingerprint(cfg);
    return {
      namespace: ns,
      digest,
      mode,
      state: verdict?.state ?? "unjudged",
      verified: verdict?.state === "verified",
      held: mode === "enforce" && !!verdict?.held,
      reason: verdict?.reason ??
        (verdict ? null : mode === "off" ? null : "not verified yet"),
      checked_at: verdict ? new Date(verdict.checkedAt).toISOString() : null,
      current,
      via: verdict?.via ?? null,
      by_platforms: !!verdict?.byPlatforms,
      hold: verdict?.held
        ? {
          since: new Date(verdict.held.since).toISOString(),
          until: new Date(verdict.held.until).toISOString(),
          expired: !!verdict.held.expired,
          tags: verdict.held.tags,
        }
        : null,
      signers: verdict?.signers ?? [],
    };
  }

  /**
   * `image` for CEL rules (issue 34): the verdict of the image `reference` names (a tag as it
   * resolves for everyone; a tag only held resolves to its held image). Never throws: a
   * reference naming nothing is an unknown image, unverified.
   */
  async imageFacts(ns: string, reference: string): Promise<ImageFacts> {
    const unknown = {
      digest: "",
      verified: false,
      state: "unknown",
      held: false,
      signers: [],
    };
    let digest = reference;
    if (!reference.includes(":")) {
      if (!isValidTag(reference)) return unknown;
      const { tag, held } = await this.d.meta.tagWithHeld(ns, reference);
      const d = tag?.digest ?? held?.digest;
      if (!d) return unknown;
      digest = d;
    } else if (!parseDigest(reference)) return unknown;
    const v = await this.d.meta.verdict(ns, digest);
    const mode = this.policyOf(ns)?.mode;
    return {
      digest,
      verified: !!mode && v?.state === "verified",
      state: !mode ? "unjudged" : v?.state ?? "unjudged",
      held: mode === "enforce" && !!v?.held,
      signers: v?.signers.filter((s) => s.valid).map((s) => s.signer ?? s.artifact) ??
        [],
    };
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
      out.push(...this.plan("image.verified", ns, digest, next, cfg));
    }
    if (prev?.held && !next.held) {
      out.push(...this.plan("image.released", ns, digest, next, cfg));
    }
    if (!prev?.held && next.held) {
      out.push(...this.plan("image.held", ns, digest, next, cfg));
    }
    if (
      next.state === "unverified" && cfg.mode === "warn" &&
      prev?.state !== "unverified"
    ) {
      out.push(...this.plan("image.unverified", ns, digest, next, cfg));
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

  /** One signature event, as planned mutations (nothing when no webhook or audit wants it). */
  plan(
    kind: EventKind,
    ns: string,
    digest: string,
    v: SignatureVerdict,
    cfg: VerifyConfig,
    extra: { expired?: boolean } = {},
  ): PlannedMutation[] {
    const ev = this.d.events;
    if (!ev.wanted(kind, ns)) return [];
    const e = ev.event(kind, { namespace: ns, digest, reference: digest });
    e.signature = {
      mode: cfg.mode,
      verified: v.state === "verified",
      reason: v.reason ?? null,
      signers: v.signers.filter((s) => s.valid).map((s) => s.signer ?? s.artifact),
      held_tags: v.held?.tags ?? [],
      ...extra,
    };
    return ev.plan(e);
  }
}

function cut(s: string | undefined | null): string | undefined {
  if (s === undefined || s === null) return undefined;
  return s.length > TEXT_KEPT ? s.slice(0, TEXT_KEPT) + "…" : s;
}

/** A verdict, and whether an index verified through its platforms' own signatures. */
type Judged = ImageVerdict & { byPlatforms?: boolean };

/** The stored form of a verdict: bounded whatever the artifacts said. */
export function record(
  v: Judged,
  fingerprint: string,
  pushedBy: PusherRecord | null,
): SignatureVerdict {
  const out: SignatureVerdict = {
    state: v.verified ? "verified" : "unverified",
    fingerprint,
    checkedAt: v.checkedAt,
    signers: v.signers.slice(0, SIGNERS_KEPT).map((s) => {
      const o: StoredSigner = {
        format: s.format,
        artifact: s.artifact,
        signer: cut(s.signer) ?? null,
        valid: s.valid,
      };
      const reason = cut(s.reason);
      if (reason !== undefined) o.reason = reason;
      return o;
    }),
    pushedBy,
  };
  if (v.verified && v.byPlatforms) out.byPlatforms = true;
  const reason = cut(v.reason);
  if (!v.verified && reason !== undefined) out.reason = reason;
  return out;
}

function sameVerdict(a: SignatureVerdict, b: SignatureVerdict): boolean {
  return a.state === b.state && a.fingerprint === b.fingerprint &&
    !!a.held === !!b.held &&
    a.via === b.via && !!a.byPlatforms === !!b.byPlatforms &&
    JSON.stringify(a.signers) === JSON.stringify(b.signers);
}

/** RFC 7234's Warning header value for a served image that is not verified. */
function warning(text: string): string {
  return `299 - ${JSON.stringify(text.replace(/[^\x20-\x7e]/g, "?").slice(0, 300))}`;
}

function denied(
  ns: string,
  digest: string,
  v: SignatureVerdict | null,
  what: string,
): RegistryError {
  const why = v?.reason ?? `${digest} has not been verified yet`;
  return new RegistryError(
    "DENIED",
    `${what}${truncate(ns)}@${digest} is held until it is signed: ${why}`,
  );
}
