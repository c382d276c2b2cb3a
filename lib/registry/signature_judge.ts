// Judging (issue 34, signatures.ts's head): the artifacts a subject has here, bounded, turned into
// a verdict by the engine (lib/signatures), with the platform rule for an index not signed itself;
// the policy and trust fingerprint of a repository, and the events a verdict plans.
import { type Config, repositoryOf, type VerifyConfig } from "../config/mod.ts";
import {
  checkSignature,
  type ImageVerdict,
  indexVerdict,
  type PlatformVerdict,
  type SignatureArtifact,
  type SignatureFormat,
  type SignerVerdict,
  trustFingerprint,
  verifySubject,
} from "../signatures/mod.ts";
import type { ParsedManifest } from "../oci/mod.ts";
import type { PlannedMutation, RevisionRecord, SignatureVerdict, TagRecord } from "../kv/mod.ts";
import { type ManifestMeta, type SignatureMeta } from "../metadata/mod.ts";
import type { WriteEffects } from "../effects/mod.ts";
import type { Events } from "../events/mod.ts";
import type { EventKind } from "../config/mod.ts";
import { cosignSignatureTag, platformString, referrerFormat } from "./signature_rules.ts";
import type { Judged } from "./signature_verdict.ts";

/** Signature artifacts judged per subject: the `.sig` tag and the first referrers of a kind. */
export const ARTIFACTS_MAX = 16;
/** Referrers of a subject looked through for signatures (a million referrers cost this). */
export const REFERRERS_SCANNED = 256;
/** Children of an index whose verdicts the platform rule reads. */
export const CHILDREN_JUDGED_MAX = 256;
/** Indexes of a child asked whether their signature covers it. */
export const PARENTS_ASKED = 8;

/** An unverified pull-through image asks its upstream for signatures again after this. */
export const UPSTREAM_RECHECK_MS = 60_000;

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
  /** whether `ns` is a pull-through namespace (its upstream's signatures are fetched first) */
  mirrored?: (ns: string) => boolean;
  /** a DELETE by digest (on_expiry = "delete") */
  deleteImage: (ns: string, digest: string) => Promise<void>;
  observe?: SignatureObserver;
}

/** A signature being pushed, judged with the stored ones before its commit. */
export interface IncomingSignature {
  artifact: SignatureArtifact;
  /** its check, begun before the registry's reads so the crypto overlaps them */
  checked: Promise<SignerVerdict[]> | null;
}

/**
 * Begins checking a signature being pushed. A sigstore bundle waits for the judgement: a message
 * signature signs the subject's manifest, which is read there.
 */
export function incomingSignature(
  subject: string,
  artifact: SignatureArtifact,
  cfg: VerifyConfig,
): IncomingSignature {
  if (artifact.format === "sigstore-bundle") return { artifact, checked: null };
  const checked = checkSignature(subject, artifact, cfg);
  checked.catch(() => {}); // awaited by the judgement, unless it ends before (no revision yet)
  return { artifact, checked };
}

/** Judging: a repository's policy and trust, a subject's artifacts, its verdict. */
export class SignatureJudge {
  readonly #fingerprints = new WeakMap<VerifyConfig, string>();

  constructor(private readonly d: SignaturesDeps) {}

  /** The repository's [verify] when it verifies anything (mode warn or enforce). */
  policyOf(ns: string): VerifyConfig | null {
    const v = repositoryOf(this.d.cfg, ns).verify;
    return v && v.mode !== "off" ? v : null;
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
   * Every signature artifact `digest` has in `ns`, bounded (ARTIFACTS_MAX, REFERRERS_SCANNED).
   * `incoming`: a signature being pushed, judged with the rest before its commit (it replaces
   * the stored `.sig` manifest, or joins the referrers).
   */
  async artifactsOf(
    ns: string,
    digest: string,
    incoming?: SignatureArtifact,
    read: { sigTag?: TagRecord | null } = {},
  ): Promise<SignatureArtifact[]> {
    const blob = (d: string, max: number) => this.d.blob(ns, d, max);
    const replacesTag = incoming?.format === "cosign-tag";
    const sigTag = replacesTag || read.sigTag !== undefined ? null : cosignSignatureTag(digest);
    // The `.sig` tag (unless read with the judgement) and the referrers are looked up at once.
    const [tagged, referrers] = await Promise.all([
      sigTag ? this.d.manifests.tag(ns, sigTag) : replacesTag ? null : read.sigTag ?? null,
      this.d.meta.referrersOf(ns, digest, REFERRERS_SCANNED),
    ]);
    const wanted: { format: SignatureFormat; digest: string }[] = [];
    if (tagged) wanted.push({ format: "cosign-tag", digest: tagged.digest });
    for (const r of referrers) {
      if (wanted.length >= ARTIFACTS_MAX - (incoming ? 1 : 0)) break;
      if (r.digest === incoming?.digest) continue;
      const format = referrerFormat(r.rec.artifactType, r.rec.mediaType);
      if (format) wanted.push({ format, digest: r.digest });
    }
    const found = await Promise.all(wanted.map(async (w) => {
      const rev = await this.d.manifests.revision(ns, w.digest);
      if (!rev) return null;
      const manifest = await this.d.body(ns, w.digest, rev);
      return { format: w.format, digest: w.digest, manifest, readBlob: blob };
    }));
    const out: SignatureArtifact[] = found.filter((a) => a !== null);
    if (!incoming) return out;
    // Where a judgement after its commit would find it: the `.sig` first, referrers by digest
    // (the stored verdict's signers keep one order either way).
    let at = 0;
    if (!replacesTag) {
      if (out[0]?.format === "cosign-tag") at = 1;
      while (at < out.length && out[at].digest < incoming.digest) at++;
    }
    out.splice(at, 0, incoming);
    return out;
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
    opts: { incoming?: IncomingSignature; sigTag?: TagRecord | null } = {},
  ): Promise<Judged> {
    const { incoming } = opts;
    const started = performance.now();
    let own: ImageVerdict;
    try {
      const artifacts = await this.artifactsOf(ns, digest, incoming?.artifact, opts);
      own = await verifySubject(digest, artifacts, cfg, new Date(), {
        subjectManifest: bytes ?? undefined,
        checked: incoming?.checked
          ? new Map([[incoming.artifact.digest, incoming.checked]])
          : undefined,
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
