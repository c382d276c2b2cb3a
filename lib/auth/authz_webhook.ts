// The authorization webhook (issue 14): after the CEL policies allow a request, an external
// service is asked. The request goes as a GET whose headers describe it (X-Svc-Action,
// X-Svc-Namespace, …, plus the configured forward_headers of the client's request); the
// answer's status decides: 2xx allows, 401/403 denies (remembered for cache_ttl_secs), anything
// else, no answer within timeout_ms or an unreachable service denies without being remembered.
// Listings are never asked (SPEC §Catalog rule 2, Repositories listing).
import { type AuthWebhookConfig, type Config, repositoryOf } from "../config/mod.ts";

export type AuthzDecision = "allow" | "deny" | "cached-deny" | "error";

export interface AuthzRequest {
  action: string;
  method: string;
  namespace?: string;
  reference?: string;
  digest?: string;
  tag?: string;
}

export interface AuthzIdentity {
  id?: string;
  username?: string;
  /** which sign-in method vouched for it: a username is unique within one provider only */
  provider?: string;
  /** the OIDC provider's issuer */
  issuer?: string;
}

export type ObserveAuthz = (webhook: string, decision: AuthzDecision, seconds: number) => void;

/** Denials remembered at once, per process; the oldest go first past this. */
const CACHE_MAX = 10_000;

export class AuthorizationWebhooks {
  private readonly denied = new Map<string, number>();

  constructor(
    private readonly cfg: Config,
    private readonly observe: ObserveAuthz = () => {},
    private readonly now: () => number = Date.now,
  ) {}

  /** The webhook governing `ns` (the repository's, else the global one), or null. */
  webhookFor(ns: string | undefined): AuthWebhookConfig | null {
    const name = (ns !== undefined ? repositoryOf(this.cfg, ns).authorizationWebhook : undefined) ??
      this.cfg.global.authorizationWebhook;
    return name ? this.cfg.auth.webhooks.get(name) ?? null : null;
  }

  /** True when the request may proceed: no webhook applies, or it allowed. */
  async allows(
    req: AuthzRequest,
    identity: AuthzIdentity,
    clientIp: string,
    headers: Headers,
  ): Promise<boolean> {
    const hook = this.webhookFor(req.namespace);
    if (!hook) return true;
    const out: Record<string, string> = {
      "User-Agent": "wharf-authz/1",
      "X-Svc-Action": req.action,
      "X-Svc-Method": req.method,
      "X-Svc-Client-Ip": clientIp,
    };
    const put = (k: string, v: string | undefined) => {
      if (v !== undefined) out[k] = v;
    };
    put("X-Svc-Namespace", req.namespace);
    if (req.namespace !== undefined) {
      put("X-Svc-Repository", repositoryOf(this.cfg, req.namespace).name);
    }
    put("X-Svc-Reference", req.reference);
    put("X-Svc-Digest", req.digest);
    put("X-Svc-Tag", req.tag);
    put("X-Svc-Username", identity.username);
    put("X-Svc-Identity-Id", identity.id);
    // A name is only unique within its sign-in method: the webhook sees which one vouched for it.
    put("X-Svc-Identity-Provider", identity.provider);
    put("X-Svc-Identity-Issuer", identity.issuer);
    for (const h of hook.forwardHeaders) {
      const v = headers.get(h);
      if (v !== null) out[h] = v;
    }
    const key = JSON.stringify([hook.name, hook.url, out]);
    const t0 = performance.now();
    const until = this.denied.get(key);
    if (until !== undefined) {
      if (until > this.now()) {
        this.observe(hook.name, "cached-deny", 0);
        return false;
      }
      this.denied.delete(key);
    }
    let status: number | null = null;
    try {
      const res = await fetch(hook.url, {
        method: "GET",
        headers: out,
        redirect: "manual",
        signal: AbortSignal.timeout(hook.timeoutMs),
      });
      status = res.status;
      await res.body?.cancel().catch(() => {});
    } catch {
      status = null; // timeout, refused, garbage: deny, not remembered
    }
    const seconds = (performance.now() - t0) / 1000;
    if (status !== null && status >= 200 && status < 300) {
      this.observe(hook.name, "allow", seconds);
      return true;
    }
    if (status === 401 || status === 403) {
      if (hook.cacheTtlSecs > 0) this.remember(key, this.now() + hook.cacheTtlSecs * 1000);
      this.observe(hook.name, "deny", seconds);
      return false;
    }
    this.observe(hook.name, "error", seconds);
    return false;
  }

  private remember(key: string, until: number): void {
    this.denied.delete(key);
    if (this.denied.size >= CACHE_MAX) this.denied.delete(this.denied.keys().next().value!);
    this.denied.set(key, until);
  }
}
