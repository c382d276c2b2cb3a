// The audit trail at the HTTP edge: the request context every record of a request carries, the
// records of acts that are not registry writes (token issue, upload cancel, job admin) and of
// refusals, and GET /v2/_svc/audit. Registry writes plan their own records (lib/events).
import type { Action } from "./actions.ts";
import { RegistryError, truncate } from "../lib/oci/mod.ts";
import {
  type AuditContext,
  type AuditQuery,
  type AuditTrail,
  currentAuditContext,
  isAuditId,
  requestIdOf,
  withAuditContext,
} from "../lib/audit/mod.ts";
import { currentActor } from "../lib/events/mod.ts";
import { jsonResponse } from "./request.ts";
import { extensionQueryError, Query } from "./query.ts";
import type { RequestScope } from "./scope.ts";

export const AUDIT_DEFAULT_N = 100;
/** Larger pages are served at this size (with `next`), as the jobs listing does. */
export const AUDIT_MAX_N = 1000;

/** Acts recorded when they succeed whose writes (if any) are not registry writes. */
const ACTS: Partial<Record<string, string>> = {
  "get-token": "token.issue",
  "cancel-upload": "upload.cancel",
  "retry-job": "job.retry",
  "delete-job": "job.delete",
};

/**
 * Runs a request's handling with its audit context; records its act when it is one of ACTS,
 * and a refusal (403 DENIED, or 401 to a request that carried credentials) within the denial
 * rate bound. Only an enabled trail writes anything.
 */
export async function audited(
  trail: AuditTrail,
  req: Request,
  handle: () => Promise<Response>,
): Promise<Response> {
  const ctx: AuditContext = {
    requestId: trail.enabled ? requestIdOf(req.headers.get("x-request-id")) : null,
    action: null,
  };
  return await withAuditContext(ctx, async () => {
    try {
      const res = await handle();
      const act = ctx.action && ACTS[ctx.action];
      if (act && res.status < 300 && trail.enabled) {
        await trail.record({ ...who(ctx), action: act, detail: jobOf(req, ctx) });
      }
      return res;
    } catch (e) {
      if (trail.enabled && e instanceof RegistryError && refusal(e, req)) {
        await trail.denied({
          ...who(ctx),
          action: ctx.action ?? "unknown",
          detail: `${e.code}: ${e.detail || e.message}`,
        });
      }
      throw e;
    }
  });
}

/** Names the action (and what it targets) for the request's records, once it is parsed. */
export function auditAction(a: Action, mount: string | null): void {
  const ctx = currentAuditContext();
  if (!ctx) return;
  ctx.action = mount !== null ? "mount-blob" : a.name;
  ctx.namespace = a.namespace;
  ctx.reference = a.uuid ?? a.reference ?? a.tag;
  ctx.digest = mount ?? a.digest;
}

function who(ctx: AuditContext) {
  const actor = currentActor();
  return {
    identity: actor.username ?? actor.id,
    provider: actor.provider,
    client_ip: actor.client_ip,
    namespace: ctx.namespace ?? null,
    reference: ctx.reference ?? null,
    digest: ctx.digest ?? null,
  };
}

function refusal(e: RegistryError, req: Request): boolean {
  if (e.code === "DENIED") return true;
  return e.code === "UNAUTHORIZED" && req.headers.has("authorization");
}

function jobOf(req: Request, ctx: AuditContext): string | undefined {
  if (ctx.action !== "retry-job" && ctx.action !== "delete-job") return undefined;
  const q = new Query(new URL(req.url).searchParams);
  const queue = truncate(q.first("queue") ?? "cache", 32);
  return `queue ${queue} key ${truncate(q.first("key") ?? "", 80)}`;
}

const badQuery = extensionQueryError;
const PARAMS = ["identity", "namespace", "action", "since", "until", "n", "next"];
const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/;
const ACTION = /^[a-z][a-z.-]{0,63}$/;
const NS_PREFIX = /^[a-z0-9][a-z0-9._\/-]{0,254}$/;

/** SPEC §Errors rule 4 as the other listings: a malformed filter is 404, never defaulted. */
export function parseAuditQuery(p: Query): AuditQuery {
  p.atMostOnce(PARAMS);
  const time = (name: string) => {
    const v = p.matching(name, RFC3339, "an RFC 3339 time");
    if (v === null) return null;
    const t = Date.parse(v);
    if (!Number.isFinite(t) || t < 0) throw badQuery(`${name} is not a usable time: ${v}`);
    return t;
  };
  const identity = p.one("identity");
  if (identity !== null && (identity === "" || identity.length > 256)) {
    throw badQuery("identity must be 1 to 256 characters");
  }
  const nRaw = p.matching("n", /^\d{1,15}$/, "a non-negative integer");
  const next = p.one("next");
  if (next !== null && !isAuditId(next)) throw badQuery(`next is not an audit cursor`);
  const q: AuditQuery = {
    identity,
    namespacePrefix: p.matching("namespace", NS_PREFIX, "a namespace prefix"),
    action: p.matching("action", ACTION, "an action name"),
    since: time("since"),
    until: time("until"),
    n: nRaw === null ? AUDIT_DEFAULT_N : Math.min(Number(nRaw), AUDIT_MAX_N),
    next,
  };
  if (q.since !== null && q.until !== null && q.since > q.until) {
    throw badQuery("since is after until");
  }
  return q;
}

export async function auditHandler(
  { req, query, registry: reg, headers: extra, head }: RequestScope,
): Promise<Response> {
  await req.body?.cancel();
  const trail = reg.events.audit;
  if (!trail.enabled) throw new RegistryError("NAME_UNKNOWN", "the audit trail is not enabled");
  const q = parseAuditQuery(query);
  const page = q.n === 0 ? { records: [] } : await trail.list(q);
  return jsonResponse(page, extra, head);
}
