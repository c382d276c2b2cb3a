// Authorization of an Action for an authenticated request: the CEL policies decide; a refusal
// is 401 with a challenge for anonymous callers (so clients know to send credentials) and 403
// DENIED for authenticated ones. A request writing several tags is decided once per tag
// (decisionsOf), and a refusal of any refuses it.
import type { Config } from "../lib/config/mod.ts";
import type { PolicyImage, PolicyRequest, PolicySet } from "../lib/policy/mod.ts";
import type { AuthorizationWebhooks, AuthResult } from "../lib/auth/mod.ts";
import { RegistryError } from "../lib/oci/mod.ts";
import type { Action } from "./actions.ts";

export interface RequestContext {
  method: string;
  clientIp: string;
  auth: AuthResult;
  /** the origin the client reached us at (Host / trusted X-Forwarded-*); null when unusable */
  origin?: string | null;
}

const PULL = new Set([
  "get-blob",
  "get-manifest",
  "list-tags",
  "get-referrers",
  "list-revisions",
  "list-uploads",
  "get-signatures",
]);
const DELETE = new Set(["delete-blob", "delete-manifest"]);

/** Listings are filtered by the policies alone: the authorization webhook is not asked. */
const LISTINGS = new Set([
  "list-catalog",
  "list-tags",
  "list-repositories",
  "list-namespaces",
  "list-revisions",
  "list-uploads",
  "get-referrers",
  "list-jobs",
  "list-failed-jobs",
]);

/** Authorization webhook calls of one request under way at once (one decision per tag). */
const WEBHOOK_CONCURRENCY = 8;

/**
 * The decisions a request needs: the action itself, or, when it names tags or images outside
 * its path, one per name. A push by digest is decided per tag it writes (`tags`) only: it has
 * no tag of its own, and a rule about `request.tag` judges each. A delete by digest is decided
 * as itself, as it is without tags (no rule about deletes by digest loosens), and per tag it
 * removes. A diff is decided per image it compares (`compared`), with `reference` and its
 * `tag` or `digest`.
 */
export function decisionsOf(a: Action): Action[] {
  const { tags, compared, ...one } = a;
  if (compared?.length) {
    return compared.map((reference) =>
      reference.includes(":") ? { ...one, reference, digest: reference } : {
        ...one,
        reference,
        tag: reference,
      }
    );
  }
  if (!tags?.length) return [a];
  const each = tags.map((tag) => ({ ...one, tag }));
  return a.name === "put-manifest" ? each : [one, ...each];
}

export class Gate {
  constructor(
    private readonly cfg: Config,
    private readonly policies: PolicySet,
    private readonly webhooks?: AuthorizationWebhooks,
  ) {}

  /**
   * After `check` allowed: the authorization webhook of the action's namespace (or the global
   * one) is asked; a refusal is answered as a policy refusal is.
   */
  async checkWebhook(ctx: RequestContext, a: Action, headers: Headers): Promise<void> {
    if (!(await this.webhookAllows(ctx, a, headers))) throw this.webhookRefusal(ctx, a);
  }

  /**
   * `checkWebhook` for each decision of a request (decisionsOf), a few at a time; the first
   * refusal refuses the request and no further decision is asked for.
   */
  async checkWebhooks(ctx: RequestContext, decisions: Action[], headers: Headers): Promise<void> {
    if (decisions.length === 1) return await this.checkWebhook(ctx, decisions[0], headers);
    let next = 0;
    let refused: Action | null = null;
    const worker = async () => {
      while (refused === null && next < decisions.length) {
        const a = decisions[next++];
        if (!(await this.webhookAllows(ctx, a, headers))) refused ??= a;
      }
    };
    await Promise.all(
      Array.from({ length: Math.min(WEBHOOK_CONCURRENCY, decisions.length) }, worker),
    );
    if (refused !== null) throw this.webhookRefusal(ctx, refused);
  }

  private webhookRefusal(ctx: RequestContext, a: Action): RegistryError {
    const id = ctx.auth.identity;
    if (ctx.auth.method === "anonymous" || (id.id === undefined && id.username === undefined)) {
      return this.unauthorized(a, "authentication required", ctx.origin);
    }
    return new RegistryError("DENIED", `${described(a)} denied by the authorization webhook`);
  }

  /** The authorization webhook's answer for `a` (true when none applies). */
  async webhookAllows(ctx: RequestContext, a: Action, headers: Headers): Promise<boolean> {
    if (!this.webhooks || a.namespace === undefined || LISTINGS.has(a.name)) return true;
    return await this.webhooks.allows(
      {
        action: a.name,
        method: ctx.method,
        namespace: a.namespace,
        reference: a.reference,
        digest: a.digest,
        tag: a.tag,
      },
      ctx.auth.identity,
      ctx.clientIp,
      headers,
    );
  }

  allows(
    ctx: RequestContext,
    a: Action,
    extra: Partial<PolicyRequest> = {},
    image?: PolicyImage,
  ): boolean {
    return this.policies.allows(this.request(ctx, a, extra), ctx.auth.identity, image);
  }

  /**
   * An action only an explicit grant allows (`get-held`: roles that may see held images, issue
   * 34): a rule of a default-deny policy must allow it (PolicySet.grants).
   */
  grants(ctx: RequestContext, a: Action): boolean {
    return this.policies.grants(this.request(ctx, a, {}), ctx.auth.identity);
  }

  private request(ctx: RequestContext, a: Action, extra: Partial<PolicyRequest>): PolicyRequest {
    const req: PolicyRequest = {
      action: a.name,
      method: ctx.method,
      client_ip: ctx.clientIp,
      ...extra,
    };
    if (a.namespace !== undefined) req.namespace = a.namespace;
    if (a.digest !== undefined) req.digest = a.digest;
    if (a.reference !== undefined) req.reference = a.reference;
    if (a.tag !== undefined) req.tag = a.tag;
    return req;
  }

  check(
    ctx: RequestContext,
    a: Action,
    extra: Partial<PolicyRequest> = {},
    image?: PolicyImage,
  ): void {
    if (this.allows(ctx, a, extra, image)) return;
    // A registry token issued without credentials carries no identity: refuse it like
    // anonymous, with the challenge, so the client goes back for credentials.
    const id = ctx.auth.identity;
    if (ctx.auth.method === "anonymous" || (id.id === undefined && id.username === undefined)) {
      throw this.unauthorized(a, "authentication required", ctx.origin);
    }
    throw new RegistryError("DENIED", `${described(a)} denied by access policy`);
  }

  /** 401 UNAUTHORIZED with the challenge clients follow: Bearer realm when tokens are on. */
  unauthorized(a: Action | null, detail: string, origin?: string | null): RegistryError {
    return new RegistryError("UNAUTHORIZED", detail, {
      headers: { "WWW-Authenticate": this.challenge(a, origin) },
    });
  }

  challenge(a: Action | null, origin?: string | null): string {
    const ts = this.cfg.auth.tokenService;
    if (!ts) return 'Basic realm="wharf", charset="UTF-8"';
    let scope = "";
    if (a?.name === "list-catalog") scope = "registry:catalog:*";
    else if (a?.namespace !== undefined) {
      const verb = PULL.has(a.name) ? "pull" : DELETE.has(a.name) ? "delete" : "pull,push";
      scope = `repository:${a.namespace}:${verb}`;
    }
    // No configured realm: the token endpoint of whatever origin the client reached (one
    // config for every replica and hostname behind a load balancer).
    const realm = ts.realm ?? `${origin ?? "http://localhost"}/token`;
    return `Bearer realm="${realm}",service="${ts.service}"${scope ? `,scope="${scope}"` : ""}`;
  }
}

/** The action a refusal names, with the tag or image it was decided for when one was. */
function described(a: Action): string {
  if (a.name === "diff-images" && a.reference !== undefined) {
    return `${a.name} of ${a.reference}`;
  }
  return a.tag !== undefined && a.reference !== a.tag ? `${a.name} of tag ${a.tag}` : a.name;
}
