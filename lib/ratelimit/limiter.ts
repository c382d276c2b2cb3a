// Which buckets a request draws from (issue 26, part 3): per identity (anonymous: per client
// IP), a `requests` bucket for every registry request and a `pulls` bucket for manifest GETs
// (as Docker Hub counts pulls), with the numbers of `[global.rate_limit]` or of the namespace's
// repository where that sets them (then in the repository's own buckets). Exempt identities and
// rules skip both. Unconfigured, every call returns at once without touching anything.
import { createHash } from "node:crypto";
import {
  type Config,
  identityRefOf,
  RATE_LIMIT_DEFAULTS,
  type RateLimitConfig,
  repositoryOf,
} from "../config/mod.ts";
import { AccessPolicy, type PolicyIdentity, type PolicyRequest } from "../policy/mod.ts";
import { RegistryError } from "../oci/mod.ts";
import type { Bucket } from "./gcra.ts";
import { type KvCounts, SharedBuckets } from "./shared_buckets.ts";

export type LimitClass = "requests" | "pulls";

export interface LimitRequest {
  /** the policy request (action, method, namespace, digest, reference, tag, client_ip) */
  request: PolicyRequest;
  identity: PolicyIdentity;
  /** no credentials (or a token without a subject): limited per client IP */
  anonymous: boolean;
}

/** The window of Docker Hub's header form (`100;w=3600`): pulls_per_hour refills over an hour. */
export const PULL_WINDOW_SECS = 3600;

/** Probes and the UI's own files are never limited: an orchestrator must see a live server. */
const UNCOUNTED = new Set(["healthz", "readyz", "metrics", "ui-asset"]);

/** The answer of an unlimited request (never written to: callers copy it). */
const NO_HEADERS: Record<string, string> = Object.freeze({}) as Record<string, string>;

/** Longer identity strings are hashed so no key nears KV's 2 KiB limit. */
const MAX_WHO = 256;

export interface LimiterHooks {
  /** a request refused */
  onLimited?: (cls: LimitClass) => void;
  /** a KV operation made (settles and first loads) */
  onKvOp?: (op: keyof KvCounts) => void;
  /** the KV failed; the limiter went on from this process's view */
  onError?: (e: unknown) => void;
}

interface Plan {
  cls: LimitClass;
  scope: string;
  bucket: Bucket;
}

export class RateLimiter {
  private readonly buckets: SharedBuckets;
  /** compiled exemption rules per table (a reload brings new tables, compiled on first use) */
  private readonly exemptions = new WeakMap<RateLimitConfig, AccessPolicy>();

  private readonly onLimited: (cls: LimitClass) => void;

  constructor(private readonly cfg: Config, kv: Deno.Kv, hooks: LimiterHooks = {}) {
    this.onLimited = hooks.onLimited ?? (() => {});
    this.buckets = new SharedBuckets(
      kv,
      () => cfg.global.rateLimit?.syncIntervalMs ?? RATE_LIMIT_DEFAULTS.syncIntervalMs,
      hooks.onError,
      hooks.onKvOp,
    );
  }

  get kvCounts() {
    return this.buckets.kvCounts;
  }

  /** Settles this process's counts with the KV now. */
  flush(): Promise<void> {
    return this.buckets.flush();
  }

  /**
   * Takes the request's tokens. Returns the headers its answer carries (pull limits: Docker
   * Hub's `RateLimit-Limit`/`RateLimit-Remaining`); throws 429 TOOMANYREQUESTS with
   * `Retry-After` when a bucket is empty. Synchronous (no promise) unless a bucket's view is
   * stale and must be read first: the request path pays for a promise only then.
   */
  admit(r: LimitRequest): Record<string, string> | Promise<Record<string, string>> {
    const g = this.cfg.global.rateLimit;
    const ns = r.request.namespace;
    const rc = ns !== undefined ? repositoryOf(this.cfg, ns) : null;
    const own = rc?.rateLimit ?? null;
    if (!g && !own) return NO_HEADERS;
    if (UNCOUNTED.has(r.request.action)) return NO_HEADERS;
    if (this.exempt(r, g, rc?.name) || this.exempt(r, own, rc?.name)) return NO_HEADERS;
    const plans = plan(r.request, g, own, rc?.name ?? null);
    if (plans.length === 0) return NO_HEADERS;
    const who = whoOf(r);
    // A HEAD reads the pull bucket too (it takes nothing): its headers show the shared count.
    const refs = plans.map((p) => ({ scope: p.scope, cls: p.cls, who, bucket: p.bucket }));
    const wait = this.buckets.prepare(refs);
    if (wait) return wait.then(() => this.decide(r, plans, who));
    return this.decide(r, plans, who);
  }

  /** Takes from this process's (fresh) views: the headers, or the 429. */
  private decide(r: LimitRequest, plans: Plan[], who: string): Record<string, string> {
    let headers = NO_HEADERS;
    for (const p of plans) {
      const isPull = p.cls === "pulls";
      if (isPull && r.request.method === "HEAD") {
        headers = pullHeaders(p.bucket, this.buckets.peek(p.scope, p.cls, who, p.bucket));
        continue;
      }
      const v = this.buckets.takeNow(p.scope, p.cls, who, p.bucket);
      if (isPull) headers = pullHeaders(p.bucket, v.remaining);
      if (v.ok) continue;
      this.onLimited(p.cls);
      const retry = Math.max(1, Math.ceil(v.retryAfterMs / 1000));
      // The message is what clients print (`toomanyrequests: <message>`): make it say which limit.
      const why = refusal(p, who, r.anonymous, retry);
      throw new RegistryError("TOOMANYREQUESTS", why, {
        message: why,
        headers: { ...headers, "Retry-After": String(retry) },
      });
    }
    return headers;
  }

  private exempt(r: LimitRequest, t: RateLimitConfig | null, repo?: string): boolean {
    if (!t) return false;
    // Provider and name together: an OIDC or certificate `ci` is not the Basic user `ci`.
    const ref = r.anonymous ? null : identityRefOf(r.identity);
    if (ref !== null && t.exemptIdentities.includes(ref)) return true;
    if (t.exemptRules.length === 0) return false;
    let p = this.exemptions.get(t);
    if (!p) {
      // Syntax was checked when the config loaded; "deny" + rules: exempt when a rule is true.
      p = AccessPolicy.compile({ default: "deny", rules: t.exemptRules }, t.where);
      this.exemptions.set(t, p);
    }
    // Exemption rules see `request.repository` as access policies do.
    const request = repo !== undefined ? { ...r.request, repository: repo } : r.request;
    return p.allows(request, r.identity);
  }
}

/** The buckets a request draws from, in order (the requests bucket first). */
function plan(
  req: PolicyRequest,
  g: RateLimitConfig | null,
  own: RateLimitConfig | null,
  repo: string | null,
): Plan[] {
  const out: Plan[] = [];
  const ownRequests = own !== null && (own.requestsPerSecond !== null || own.burst !== null);
  const rps = own?.requestsPerSecond ?? g?.requestsPerSecond ?? 0;
  if (rps > 0) {
    const burst = (ownRequests ? own!.burst : null) ?? g?.burst ?? rps;
    out.push({
      cls: "requests",
      scope: ownRequests ? `repo:${repo}` : "*",
      bucket: { periodMs: 1000 / rps, capacity: burst },
    });
  }
  if (req.action === "get-manifest") {
    const ownPulls = own !== null && own.pullsPerHour !== null;
    const pph = own?.pullsPerHour ?? g?.pullsPerHour ?? 0;
    if (pph > 0) {
      out.push({
        cls: "pulls",
        scope: ownPulls ? `repo:${repo}` : "*",
        bucket: { periodMs: (PULL_WINDOW_SECS * 1000) / pph, capacity: pph },
      });
    }
  }
  return out;
}

function pullHeaders(b: Bucket, remaining: number): Record<string, string> {
  return {
    "RateLimit-Limit": `${b.capacity};w=${PULL_WINDOW_SECS}`,
    "RateLimit-Remaining": `${remaining};w=${PULL_WINDOW_SECS}`,
  };
}

function refusal(p: Plan, who: string, anonymous: boolean, retry: number): string {
  const whom = anonymous ? `anonymous clients from ${who.slice(3)}` : "this identity";
  const where = p.scope === "*" ? "" : ` in repository ${p.scope.slice(5)}`;
  const what = p.cls === "pulls"
    ? `pull rate limit reached: ${p.bucket.capacity} manifest pulls per hour`
    : `request rate limit reached: ${
      1000 / p.bucket.periodMs
    } requests per second (burst ${p.bucket.capacity})`;
  return `${what} for ${whom}${where}; retry in ${retry} s`;
}

/**
 * The bucket owner: the identity's provider and id (else username), so equal names from two
 * sign-in methods never share a bucket; the client IP when anonymous.
 */
function whoOf(r: LimitRequest): string {
  const name = r.anonymous ? undefined : (r.identity.id ?? r.identity.username);
  const who = name === undefined
    ? `ip:${r.request.client_ip ?? ""}`
    : `id:${r.identity.provider ?? ""}:${name}`;
  if (who.length <= MAX_WHO) return who;
  return `h:${createHash("sha256").update(who).digest("hex")}`;
}
