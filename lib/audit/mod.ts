// The audit trail (issue 26 §4): who did what, when, from where, with what outcome.
export {
  type AuditContext,
  currentAuditContext,
  requestIdOf,
  withAuditContext,
} from "./context.ts";
export { type AuditFields, type AuditOutcome, type AuditRecord } from "./record.ts";
export {
  AUDIT_SCAN_MAX,
  auditedRun,
  type AuditPage,
  type AuditQuery,
  AuditTrail,
  isAuditId,
} from "./trail.ts";
