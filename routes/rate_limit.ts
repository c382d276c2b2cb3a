// The rate-limit step of the request pipeline: after authentication and authorization, before
// the handler. A refusal is thrown (429 TOOMANYREQUESTS + Retry-After, mapped by errors.ts);
// pull-limit headers go on the answer through `extra`.
import type { RateLimiter } from "../lib/ratelimit/mod.ts";
import type { Action } from "./actions.ts";
import type { RequestContext } from "./authorize.ts";

export function applyRateLimit(
  limiter: RateLimiter,
  ctx: RequestContext,
  a: Action,
  extra: Headers,
): void | Promise<void> {
  const id = ctx.auth.identity;
  const admitted = limiter.admit({
    request: {
      action: a.name,
      method: ctx.method,
      client_ip: ctx.clientIp,
      namespace: a.namespace,
      digest: a.digest,
      reference: a.reference,
      tag: a.tag,
    },
    identity: id,
    anonymous: ctx.auth.method === "anonymous" ||
      (id.id === undefined && id.username === undefined),
  });
  // Most requests are decided without a promise (fresh buckets): keep this step synchronous then.
  if (admitted instanceof Promise) return admitted.then((h) => setAll(extra, h));
  setAll(extra, admitted);
}

function setAll(extra: Headers, headers: Record<string, string>): void {
  for (const k in headers) extra.set(k, headers[k]);
}
