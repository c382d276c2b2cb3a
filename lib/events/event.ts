// An event as webhooks receive it (docs/operations.md §Event webhooks has one per kind).
import type { EventKind } from "../config/mod.ts";
import type { Actor } from "./actor.ts";
import type { AuditRecord } from "../audit/mod.ts";

export interface WharfEvent {
  id: string;
  /** RFC 3339, when the operation happened */
  timestamp: string;
  kind: EventKind;
  namespace: string;
  /** the configured (or implicit) repository the namespace belongs to */
  repository: string;
  digest: string | null;
  /** the tag or digest the client named */
  reference: string | null;
  tag: string | null;
  actor: Actor;
  /** scan.completed: findings per severity (absent when the report was not checked) */
  severity_counts?: Record<string, number>;
  /** scan.completed: false when no advisory record was matched (then `not_checked` says why) */
  vulnerabilities_checked?: false;
  not_checked?: string;
  /** audit.record: the record as GET /v2/_svc/audit lists it */
  audit?: AuditRecord;
  /** blob.corrupt: what was found and what follows */
  corruption?: Corruption;
  /** image.held, .verified, .released, .rejected, .unverified: the verdict (issue 34) */
  signature?: SignatureFacts;
}

/** A signature event's verdict. */
export interface SignatureFacts {
  /** the repository's [verify] mode */
  mode: string;
  verified: boolean;
  /** why it is not verified (null when it is) */
  reason: string | null;
  /** the valid signers (key names, certificate identities) */
  signers: string[];
  /** tags waiting with a held image */
  held_tags: string[];
  /** the hold ran out: deleted (image.rejected) or kept held (image.held) */
  expired?: boolean;
}

/** blob.corrupt's details: stored bytes that do not hash to their digest (issue 38). */
export interface Corruption {
  /** a blob (layer, config) or a manifest's body */
  object: "blob" | "manifest";
  /** what the stored bytes hash to */
  found: string;
  size: number;
  /**
   * true: the namespace is a pull-through cache and fetches it again from its upstream; false:
   * it stays quarantined (no longer served) until it is pushed again
   */
  refetch: boolean;
}

export interface EventFields {
  namespace: string;
  digest?: string | null;
  reference?: string | null;
  tag?: string | null;
  severity_counts?: Record<string, number>;
  vulnerabilities_checked?: false;
  not_checked?: string;
}
