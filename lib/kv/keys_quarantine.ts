// The records of the integrity pass under lib/kv/keys.ts's keys: a digest whose bytes did not hash
// to it (quarantine/) and the one verify pass's lease and cursor (verifylock, verifycur/). The
// registry decides (lib/registry/quarantine.ts, verify.ts) and lib/metadata (quarantine.ts,
// verify_meta.ts) stores them, so they live below both.

/**
 * A digest whose stored bytes failed verification (lib/registry/quarantine.ts). Bounded: the
 * namespaces are capped at QUARANTINE_NAMESPACES_KEPT (< 8 KiB).
 */
export interface QuarantineRecord {
  /** ms since epoch when it was found */
  at: number;
  /**
   * claimed: the reclamation marker is held and the bytes may still be in place; moved: out of
   * serving, its namespaces not yet unlinked; settled: done (a verify finishes the others)
   */
  stage: "claimed" | "moved" | "settled";
  /** blob: namespaces owned it (unlinked); manifest: they hold revisions with this body */
  kind: "blob" | "manifest";
  /** stored size in bytes */
  size: number;
  /** what the stored bytes hash to */
  found: string;
  /** a manifest body kept in KV (no bytes to move: every read refuses it until a re-push) */
  inline?: boolean;
  /** whether the store kept a copy of the bytes aside (listQuarantined) */
  kept: boolean;
  /** the namespaces concerned, at most QUARANTINE_NAMESPACES_KEPT */
  namespaces: string[];
  /** how many more there were */
  more: number;
  /** of those, pull-through namespaces that fetch it again from their upstream */
  refetch: string[];
}

export const QUARANTINE_NAMESPACES_KEPT = 20;

/** Who runs the one verify pass (`host` and `pid` for messages), renewed at `at`. */
export interface VerifyLease {
  holder: string;
  at: number;
  host: string;
  pid: number;
}

/**
 * Where a verify pass goes on after an interruption, and its figures so far; once it finished,
 * when (the schedule's next pass is due from then). < 4 KiB.
 */
export interface VerifyCursor {
  id: string;
  startedAt: number;
  /** blobs: the blob store's objects; manifests: manifest bodies kept in KV; done: finished */
  phase: "blobs" | "manifests" | "done";
  /** ms since epoch when the pass finished (phase done) */
  finishedAt?: number;
  /** the last key done in the phase; null: from its start */
  after: Deno.KvKey | null;
  /** the pass's figures so far (VerifySummary's counters) */
  counts: Record<string, number>;
}
