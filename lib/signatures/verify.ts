// verifySubject: every artifact of a subject checked offline and within bounds, then the
// threshold of distinct valid signers applied. Nothing but a verdict ever comes out.
import { sha256Hex } from "./artifact.ts";
import { checkCosign } from "./cosign.ts";
import { Budget, LIMITS, Refused } from "./limits.ts";
import { checkNotation } from "./notation.ts";
import { checkBundle } from "./sigstore.ts";
import type { ImageVerdict, SignatureArtifact, SignerVerdict, VerifyConfig } from "./types.ts";

export interface VerifyOptions {
  /**
   * the subject's manifest bytes: a sigstore bundle holding a message signature (not DSSE)
   * signs them, so it can be checked only with them
   */
  subjectManifest?: Uint8Array;
  /**
   * artifacts already being checked (by digest), e.g. a signature being pushed, checked while
   * the registry reads the ones it has stored (checkSignature)
   */
  checked?: ReadonlyMap<string, Promise<SignerVerdict[]>>;
}

/**
 * One artifact checked on its own (its own budget: bounded all the same), to hand to
 * verifySubject as `checked`. Not for a sigstore bundle holding a message signature, which
 * needs the subject's manifest: the caller leaves those to verifySubject.
 */
export function checkSignature(
  digest: string,
  art: SignatureArtifact,
  cfg: VerifyConfig,
  now: Date = new Date(),
): Promise<SignerVerdict[]> {
  return checkArtifact(digest, art, cfg, new Budget(), now, {});
}

/**
 * Verifies the subject `digest` against the artifacts. Offline: no network call. Bounded work
 * whatever the artifacts hold: at most LIMITS.artifacts artifacts are read, each within its
 * size bounds, and at most LIMITS.signatureChecks signature checks are made.
 */
export async function verifySubject(
  digest: string,
  artifacts: SignatureArtifact[],
  cfg: VerifyConfig,
  now: Date = new Date(),
  options: VerifyOptions = {},
): Promise<ImageVerdict> {
  const checkedAt = now.getTime();
  if (!sha256Hex(digest)) {
    return { verified: false, signers: [], reason: `${digest} is not a sha256 digest`, checkedAt };
  }
  const budget = new Budget();
  const signers: SignerVerdict[] = [];
  for (const art of artifacts.slice(0, LIMITS.artifacts)) {
    const early = options.checked?.get(art.digest);
    signers.push(...await (early ?? checkArtifact(digest, art, cfg, budget, now, options)));
  }
  const skipped = Math.max(0, artifacts.length - LIMITS.artifacts);
  const valid = new Set(signers.filter((s) => s.valid).map((s) => s.signer));
  if (valid.size >= cfg.threshold) return { verified: true, signers, checkedAt };
  const note = skipped > 0 ? `; ${skipped} more signature artifacts were not read` : "";
  if (valid.size === 0) {
    const why = signers.length > 0 ? ` (${signers.map((s) => s.reason).join("; ")})` : "";
    return {
      verified: false,
      signers,
      reason: `no signature by a trusted key for ${digest}${clip(why)}${note}`,
      checkedAt,
    };
  }
  return {
    verified: false,
    signers,
    reason:
      `${valid.size} of the ${cfg.threshold} trusted signers required have signed ${digest}${note}`,
    checkedAt,
  };
}

function clip(s: string): string {
  return s.length > 600 ? `${s.slice(0, 597)}...)` : s;
}

/** One artifact's verdicts; whatever it holds, only verdicts come back. */
async function checkArtifact(
  digest: string,
  art: SignatureArtifact,
  cfg: VerifyConfig,
  budget: Budget,
  now: Date,
  options: VerifyOptions,
): Promise<SignerVerdict[]> {
  const format = art.format;
  try {
    switch (format) {
      case "cosign-tag":
        return await checkCosign(digest, art, cfg, budget);
      case "sigstore-bundle": {
        const signer = await checkBundle(digest, art, cfg, budget, options.subjectManifest);
        return [{ format, artifact: art.digest, signer, valid: true }];
      }
      case "notation": {
        const signer = await checkNotation(digest, art, cfg, budget, now);
        return [{ format, artifact: art.digest, signer, valid: true }];
      }
      default:
        return [{
          format,
          artifact: String(art.digest),
          signer: null,
          valid: false,
          reason: `unknown signature format ${String(format)}`,
        }];
    }
  } catch (e) {
    const refused = e instanceof Refused;
    return [{
      format,
      artifact: String(art.digest),
      signer: refused ? e.signer : null,
      valid: false,
      reason: refused ? e.message : `cannot be checked: ${(e as Error)?.message ?? String(e)}`,
    }];
  }
}
