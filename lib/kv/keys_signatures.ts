// The records of signature verification under lib/kv/keys.ts's keys (issue 34): a revision's
// verdict with its hold (sigv/) and a held push's tag (heldtag/). The registry judges
// (lib/registry/signatures.ts) and lib/metadata (signature_meta.ts) stores them, so they live
// below both.

/** Who pushed a held image: the one identity (besides roles granted get-held) that may pull it. */
export interface PusherRecord {
  provider: string;
  id?: string;
  username?: string;
}

/** One signature as a verdict keeps it (strings cut: a record stays < 64 KiB). */
export interface StoredSigner {
  format: string;
  /** the signature artifact's digest */
  artifact: string;
  signer: string | null;
  valid: boolean;
  reason?: string;
}

/** An image waiting for its signature (enforce), inside its verdict. */
export interface HoldInfo {
  /** ms since epoch */
  since: number;
  /** when the hold runs out (then on_expiry) */
  until: number;
  /** tags the push named, written when the image is released (at most HELD_TAGS_MAX) */
  tags: string[];
  /** the tags' creation time once written */
  tagCreatedAt: number;
  /** the hold ran out and on_expiry = "keep": held until a signature or a delete */
  expired?: boolean;
}

/**
 * A revision's signature verdict (lib/registry/signatures.ts). `state`: verified, unverified,
 * or artifact (a signature, attestation or other referrer: never held itself).
 */
export interface SignatureVerdict {
  state: "verified" | "unverified" | "artifact";
  /** the trust fingerprint it was judged under (a different one is re-checked) */
  fingerprint: string;
  checkedAt: number;
  reason?: string;
  /** at most SIGNERS_KEPT */
  signers: StoredSigner[];
  /** verified through the signature of this index, which names it */
  via?: string;
  /** an index verified through its platforms' own signatures (`platforms`), not its own */
  byPlatforms?: boolean;
  pushedBy?: PusherRecord | null;
  /** enforce: unverified and not served but to its pusher and roles granted get-held */
  held?: HoldInfo;
}

/** A tag a held push named, until the image is released (or replaced by another push). */
export interface HeldTag {
  digest: string;
  at: number;
  pushedBy: PusherRecord | null;
}

/** Tags one push into an enforce repository may name while its image is held. */
export const HELD_TAGS_MAX = 32;
