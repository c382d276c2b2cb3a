// The verdict of an image index under `platforms`: a signature on the index itself covers every
// manifest it lists (its digest pins them); otherwise the platforms the rule names must be
// signed one by one.
import type { ImageVerdict, VerifyConfig } from "./types.ts";

export interface PlatformVerdict {
  /** "os/arch" or "os/arch/variant"; attestation entries ("unknown/unknown") are left out */
  platform: string;
  digest: string;
  verdict: ImageVerdict;
}

export function indexVerdict(
  indexDigest: string,
  own: ImageVerdict,
  children: PlatformVerdict[],
  cfg: Pick<VerifyConfig, "platforms">,
  now: Date = new Date(),
): ImageVerdict {
  if (own.verified) return own;
  const checkedAt = now.getTime();
  const images = children.filter((c) => c.platform !== "unknown/unknown");
  const signed = images.filter((c) => c.verdict.verified);
  const signers = [...own.signers, ...images.flatMap((c) => c.verdict.signers)];
  const rule = cfg.platforms;
  let missing: PlatformVerdict[];
  if (rule === "any") {
    if (signed.length > 0) return { verified: true, signers, checkedAt };
    missing = images;
  } else if (rule === "all") {
    missing = images.filter((c) => !c.verdict.verified);
    if (images.length > 0 && missing.length === 0) return { verified: true, signers, checkedAt };
  } else {
    const named = images.filter((c) => rule.some((p) => c.platform === p));
    missing = named.filter((c) => !c.verdict.verified);
    if (named.length > 0 && missing.length === 0) return { verified: true, signers, checkedAt };
    if (named.length === 0) {
      return {
        verified: false,
        signers,
        reason: `${indexDigest} lists none of the platforms ${rule.join(", ")} and is not signed`,
        checkedAt,
      };
    }
  }
  const list = missing.slice(0, 5).map((c) => `${c.platform} (${c.digest})`).join(", ");
  return {
    verified: false,
    signers,
    reason: missing.length > 0
      ? `no signature by a trusted key for ${indexDigest} nor for ${list}${
        missing.length > 5 ? ` and ${missing.length - 5} more` : ""
      }`
      : `no signature by a trusted key for ${indexDigest}`,
    checkedAt,
  };
}
