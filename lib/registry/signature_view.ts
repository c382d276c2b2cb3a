// What readers see of verdicts: the pull gate (a held image is refused but to its pusher and
// roles granted get-held), the signatures endpoint, the CEL rules' `image`, the revisions
// listing's column and replication's question whether an image is held.
import type { VerifyConfig } from "../config/mod.ts";
import { repositoryOf } from "../config/mod.ts";
import { isValidTag, parseDigest, RegistryError, truncate } from "../oci/mod.ts";
import type { PusherRecord, RevisionRecord, SignatureVerdict, StoredSigner } from "../kv/mod.ts";
import type { RowSignature } from "./svc_listings.ts";
import { isIndex, isPusher, type Viewer } from "./signature_rules.ts";
import { warning } from "./signature_verdict.ts";
import {
  type SignatureJudge,
  type SignaturesDeps,
  UPSTREAM_RECHECK_MS,
} from "./signature_judge.ts";
import type { SignatureHolds } from "./signature_holds.ts";

/** MANIFEST_UNKNOWN for a tag of `ns` that names nothing (this caller may see). */
function unknownTag(ns: string, tag: string): RegistryError {
  return new RegistryError("MANIFEST_UNKNOWN", `${truncate(ns)}:${truncate(tag)}`);
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

/** The gate, the endpoint's view and the listings' verdict reads. */
export class SignatureView {
  constructor(
    private readonly d: SignaturesDeps,
    private readonly judging: SignatureJudge,
    private readonly holds: SignatureHolds,
  ) {}

  /** The revisions listing's signature column: null where the repository verifies nothing. */
  async rowStates(
    ns: string,
    digests: string[],
  ): Promise<RowSignature[] | null> {
    const cfg = this.judging.policyOf(ns);
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
    const cfg = this.judging.policyOf(ns);
    if (cfg?.mode !== "enforce") return false;
    const v = await this.d.meta.verdict(ns, digest);
    return !!v?.held;
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
        throw unknownTag(ns, reference);
      } else throw unknownTag(ns, reference);
    }
    const { rev, verdict } = await this.revision(ns, digest, reference);
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
      !isIndex(rev.mediaType) && (await this.judging.coveringIndex(ns, digest)) !== null
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
      !verdict || verdict.fingerprint !== this.judging.fingerprint(cfg) ||
      (verdict.state === "unverified" &&
        Date.now() - verdict.checkedAt > UPSTREAM_RECHECK_MS)
    ) {
      verdict = (await this.holds.reconsider(ns, digest)) ?? verdict;
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

  /** The revision `digest` names and its verdict; MANIFEST_UNKNOWN naming `reference` if none. */
  private async revision(
    ns: string,
    digest: string,
    reference: string,
  ): Promise<{ rev: RevisionRecord; verdict: SignatureVerdict | null }> {
    const { rev, verdict } = await this.d.meta.revisionWithVerdict(ns, digest);
    if (!rev) throw new RegistryError("MANIFEST_UNKNOWN", `${truncate(ns)}@${truncate(reference)}`);
    return { rev, verdict };
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
      else throw unknownTag(ns, reference);
    }
    const { verdict } = await this.revision(ns, digest, reference);
    const mode = cfg?.mode ?? "off";
    const current = !!cfg && !!verdict &&
      verdict.fingerprint === this.judging.fingerprint(cfg);
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
    const mode = this.judging.policyOf(ns)?.mode;
    return {
      digest,
      verified: !!mode && v?.state === "verified",
      state: !mode ? "unjudged" : v?.state ?? "unjudged",
      held: mode === "enforce" && !!v?.held,
      signers: v?.signers.filter((s) => s.valid).map((s) => s.signer ?? s.artifact) ??
        [],
    };
  }
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
