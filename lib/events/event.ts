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
  /** scan.completed: findings per severity */
  severity_counts?: Record<string, number>;
  /** audit.record: the record as GET /v2/_svc/audit lists it */
  audit?: AuditRecord;
}

export interface EventFields {
  namespace: string;
  digest?: string | null;
  reference?: string | null;
  tag?: string | null;
  severity_counts?: Record<string, number>;
}
