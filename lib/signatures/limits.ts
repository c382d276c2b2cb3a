// The bounds every verification keeps, whatever the artifacts hold: a subject's signatures are
// untrusted input, and a hostile one (huge, deeply nested, endless) costs at most this much.
export const LIMITS = {
  /** artifacts read per subject; the rest are not looked at */
  artifacts: 16,
  /** signature layers read per cosign `.sig` manifest */
  layersPerArtifact: 8,
  /** a simple-signing payload (real ones are ~250 bytes) */
  payloadBytes: 64 * 1024,
  /** a sigstore bundle or a notation envelope (real ones are 3-10 KiB) */
  envelopeBytes: 256 * 1024,
  /** a signature artifact's manifest, as the engine reads it */
  manifestBytes: 256 * 1024,
  /** an annotation carrying a certificate, chain or Rekor bundle */
  annotationBytes: 64 * 1024,
  /** JSON nesting of any payload, bundle or envelope */
  jsonDepth: 32,
  /** certificates in one chain */
  certificates: 8,
  /** transparency-log entries in one bundle */
  tlogEntries: 8,
  /** subjects named by one in-toto statement */
  statementSubjects: 1024,
  /** signature checks per subject (trusted keys tried × signatures): the CPU bound */
  signatureChecks: 256,
} as const;

/** Why a signature does not count, in words; thrown inside the engine, never out of it. */
export class Refused extends Error {
  constructor(reason: string, readonly signer: string | null = null) {
    super(reason);
  }
}

/** Counts the signature checks of one subject and refuses past LIMITS.signatureChecks. */
export class Budget {
  private left: number = LIMITS.signatureChecks;
  spend(n = 1): void {
    if (this.left < n) {
      throw new Refused(
        `not checked: the subject's signatures need more than ${LIMITS.signatureChecks} signature checks`,
      );
    }
    this.left -= n;
  }
}
