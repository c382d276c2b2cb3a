// The rate-limit step of the request pipeline: after authentication and authorization, before
// the handler. A refusal is thrown (429 TOOMANYREQUESTS + Retry-After, mapped by errors.ts);
// pull-limit headers go on the answer through `extra`.
import type { RateLimiter } from "../lib/ratelimit/mod.ts";
import type { Action } from "./actions.ts";
import type { RequestContext } from "./authorize.ts";

export async function applyRateLimit(
  limiter: RateLimiter,
  ctx: RequestContext,
  a: Action,
  extra: Headers,
): Promise<void> {
  const id = ctx.auth.identity;
  const headers = await limiter.admit({
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
  for (const [k, v] of Object.entries(headers)) extra.set(k, v);
}
