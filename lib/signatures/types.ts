// What the verification engine takes and answers (issue 34): bytes in, a verdict out.
export type {
  NotationTrust,
  SigstoreIdentity,
  SigstoreTrust,
  StringMatch,
  TrustedKey,
  VerifyConfig,
  VerifyMode,
} from "../config/mod.ts";

export type SignatureFormat = "cosign-tag" | "sigstore-bundle" | "notation";

/**
 * One signature artifact as stored in the registry, found by the caller: a `sha256-<hex>.sig`
 * tag's manifest (cosign, simple signing) or a referrer manifest of the subject (sigstore
 * bundle, notation).
 */
export interface SignatureArtifact {
  format: SignatureFormat;
  /** the artifact's manifest digest and bytes (bounded by max_manifest_size) */
  digest: string;
  manifest: Uint8Array;
  /** reads one of the artifact's layer/blob bytes, bounded: the engine asks with a maximum and refuses bigger */
  readBlob(digest: string, maxBytes: number): Promise<Uint8Array>;
}

export interface SignerVerdict {
  format: SignatureFormat;
  /** the artifact's digest */
  artifact: string;
  /** who: "key:<name or fingerprint>", "sigstore:<SAN> (<issuer>)", "notation:<subject DN>" */
  signer: string | null;
  valid: boolean;
  /** why not, in words ("signed by an untrusted key", "payload names sha256:… not the subject") */
  reason?: string;
}

export interface ImageVerdict {
  verified: boolean;
  signers: SignerVerdict[];
  /** when not verified: "no signature by a trusted key for sha256:…" */
  reason?: string;
  checkedAt: number;
}
