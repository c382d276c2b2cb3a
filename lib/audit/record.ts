// One audited act as it is stored and listed. Every field a client can influence is bounded
// before it is stored, so a record stays a few KiB whatever the request held (KV values must
// stay < 64 KiB and a write's commit carries its record).
import { truncate } from "../oci/mod.ts";

export type AuditOutcome = "ok" | "denied" | "failed";

export interface AuditRecord {
  /** the record's time key: its place in the trail and the listing's `next` cursor */
  id: string;
  /** RFC 3339 */
  time: string;
  /** manifest.push, tag.create, …; for a denial, the CEL action refused */
  action: string;
  outcome: AuditOutcome;
  /** username, else id; null: anonymous or the server itself */
  identity: string | null;
  /** the identity's sign-in method (basic, oidc:<name>, mtls); absent in older records */
  provider?: string;
  client_ip: string | null;
  namespace: string | null;
  reference: string | null;
  digest: string | null;
  request_id: string | null;
  detail?: string;
  /** denials counted but not stored (the rate bound) since the previous stored one */
  suppressed?: number;
}

export interface AuditFields {
  action: string;
  outcome?: AuditOutcome;
  identity?: string | null;
  provider?: string | null;
  client_ip?: string | null;
  namespace?: string | null;
  reference?: string | null;
  digest?: string | null;
  request_id?: string | null;
  detail?: string;
  /** ms; default now */
  at?: number;
}

/** Bounds of the stored strings (names and tags are validated shorter; a denial's are not). */
export const FIELD_MAX = 256;
export const DETAIL_MAX = 1024;

export function bounded(v: string | null | undefined, max = FIELD_MAX): string | null {
  return v === null || v === undefined || v === "" ? null : truncate(v, max);
}

export function buildRecord(id: string, at: number, f: AuditFields): AuditRecord {
  const r: AuditRecord = {
    id,
    time: new Date(at).toISOString(),
    action: truncate(f.action, 64),
    outcome: f.outcome ?? "ok",
    identity: bounded(f.identity),
    client_ip: bounded(f.client_ip, 64),
    namespace: bounded(f.namespace),
    reference: bounded(f.reference),
    digest: bounded(f.digest, 160),
    request_id: bounded(f.request_id, 64),
  };
  const provider = bounded(f.provider, 160);
  if (provider && r.identity !== null) r.provider = provider;
  if (f.detail) r.detail = truncate(f.detail, DETAIL_MAX);
  return r;
}
