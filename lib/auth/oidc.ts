// OIDC JWT verification for Bearer tokens and OIDC-via-Basic. Every failure, including an
// unreachable or slow issuer, is an AuthenticationError (401), never a 500 or a hung request.

import {
  createLocalJWKSet,
  createRemoteJWKSet,
  customFetch,
  decodeJwt,
  errors,
  type JWTPayload,
  jwtVerify,
  type JWTVerifyGetKey,
} from "jose";
import type { OidcProviderConfig } from "../config/mod.ts";
import { log } from "../log.ts";
import { fetchGuarded, OutboundGuard, OutboundRefused } from "../http/mod.ts";
import { AuthenticationError, type Identity, oidcProvider } from "./identity.ts";

export interface OidcVerifierOptions {
  /** minimum spacing of JWKS refetches for unknown kids, and of retries after a failed fetch */
  refetchCooldownMs?: number;
  /** a cached JWKS older than this is refetched before use */
  cacheMaxAgeMs?: number;
  /** bound on each discovery / JWKS HTTP request */
  timeoutMs?: number;
}

// Asymmetric only: `none` and HS* (e.g. HMAC keyed with the published public key) never verify.
const ALGORITHMS = [
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512",
  "EdDSA",
];
const CLOCK_TOLERANCE_SECS = 30;
// Far above any real ID/access token; stops pathological inputs before any parsing.
const MAX_TOKEN_LENGTH = 64 * 1024;
const MAX_DISCOVERY_BYTES = 1024 * 1024;

const stripSlash = (s: string) => s.replace(/\/+$/, "");

class Provider {
  private keySet: JWTVerifyGetKey | null = null;
  private pending: Promise<JWTVerifyGetKey> | null = null;
  /** time of the last failed discovery/JWKS fetch, to fail fast instead of hammering the issuer */
  private failedAt = -Infinity;
  readonly issuers: string[];
  /** the discovery document and its redirects name hosts the config did not */
  private readonly guard: OutboundGuard;

  constructor(
    readonly cfg: OidcProviderConfig,
    private readonly opts: Required<OidcVerifierOptions>,
  ) {
    this.guard = new OutboundGuard({
      configured: cfg.jwksUri === null ? [cfg.issuer] : [cfg.issuer, cfg.jwksUri],
      allow: cfg.outboundAllow,
    });
    const bare = stripSlash(cfg.issuer);
    // jose compares `iss` exactly; accept both spellings since configs and IdPs disagree on it.
    this.issuers = [bare, `${bare}/`];
  }

  matchesIssuer(iss: string): boolean {
    return stripSlash(iss) === stripSlash(this.cfg.issuer);
  }

  async verify(jwt: string): Promise<Identity> {
    const getKey = await this.getKeySet();
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(jwt, getKey, {
        algorithms: ALGORITHMS,
        issuer: this.issuers,
        audience: this.cfg.audience.length > 0 ? this.cfg.audience : undefined,
        clockTolerance: CLOCK_TOLERANCE_SECS,
        // A token without exp would be valid forever; without sub there is no identity.
        requiredClaims: ["exp", "sub"],
      }));
    } catch (err) {
      throw this.fail(reason(err));
    }
    if (typeof payload.sub !== "string" || payload.sub === "") throw this.fail("invalid sub");
    for (const [claim, required] of Object.entries(this.cfg.requiredClaims)) {
      if (!claimSatisfies(payload[claim], required)) {
        throw this.fail(`required claim "${claim}" not satisfied`);
      }
    }
    return {
      id: payload.sub,
      username: this.username(payload),
      provider: oidcProvider(this.cfg.name),
      issuer: stripSlash(this.cfg.issuer),
      claims: payload as Record<string, unknown>,
    };
  }

  /**
   * `identity.username`, from `username_claim` (default `sub`): a claim the identity provider
   * controls, not one its users may choose (`preferred_username`), unless the config says so.
   * An `email` names its owner only once the provider has verified it.
   */
  private username(payload: JWTPayload): string {
    const claim = this.cfg.usernameClaim ?? "sub";
    const v = payload[claim];
    if (typeof v !== "string" || v === "") throw this.fail(`no "${claim}" claim for the username`);
    if (claim === "email" && payload.email_verified !== true) {
      throw this.fail(`"email" is not verified (email_verified is not true)`);
    }
    return v;
  }

  private async vet(url: URL, signal?: AbortSignal): Promise<void> {
    try {
      await this.guard.check(url, signal);
    } catch (err) {
      if (err instanceof OutboundRefused) this.refused(err);
      throw err;
    }
  }

  /** The client is told the issuer is unavailable; the operator learns why. */
  private refused(err: OutboundRefused): never {
    log.warn("oidc request refused", { provider: this.cfg.name, error: err.message });
    throw this.fail("issuer unavailable");
  }

  private fail(why: string): AuthenticationError {
    return new AuthenticationError(`oidc provider "${this.cfg.name}": ${why}`);
  }

  private getKeySet(): Promise<JWTVerifyGetKey> {
    if (this.keySet) return Promise.resolve(this.keySet);
    if (performance.now() - this.failedAt < this.opts.refetchCooldownMs) {
      return Promise.reject(this.fail("issuer unavailable"));
    }
    this.pending ??= this.discover().then(
      (uri) => {
        const remote = createRemoteJWKSet(uri, {
          cooldownDuration: this.opts.refetchCooldownMs,
          cacheMaxAge: this.opts.cacheMaxAgeMs,
          timeoutDuration: this.opts.timeoutMs,
          // jose does not follow redirects; the address of a discovered jwks_uri is vetted on
          // every fetch, as its DNS may change between them.
          [customFetch]: async (url, init) => {
            await this.vet(new URL(url), init.signal ?? undefined);
            return await fetch(url, init);
          },
        });
        // jose's cooldown only counts successful fetches; after a failed one, serve the keys we
        // still hold (while fresh) and refetch at most once per cooldown.
        let fallback: JWTVerifyGetKey | null = null;
        this.keySet = async (header, token) => {
          if (performance.now() - this.failedAt < this.opts.refetchCooldownMs) {
            if (!fallback || !remote.fresh) throw new FetchFailed();
            return await fallback(header, token);
          }
          try {
            return await remote(header, token);
          } catch (err) {
            if (isFetchFailure(err)) {
              this.failedAt = performance.now();
              const held = remote.jwks();
              fallback = held ? createLocalJWKSet(held) : null;
              throw new FetchFailed();
            }
            throw err;
          }
        };
        this.pending = null;
        return this.keySet;
      },
      (err) => {
        this.failedAt = performance.now();
        this.pending = null;
        throw err instanceof AuthenticationError ? err : this.fail("issuer unavailable");
      },
    );
    return this.pending;
  }

  private async discover(): Promise<URL> {
    if (this.cfg.jwksUri) return new URL(this.cfg.jwksUri);
    const url = `${stripSlash(this.cfg.issuer)}/.well-known/openid-configuration`;
    const signal = AbortSignal.timeout(this.opts.timeoutMs);
    let res: Response;
    try {
      res = await fetchGuarded(
        url,
        { headers: { accept: "application/json" }, signal },
        this.guard,
      );
    } catch (err) {
      if (err instanceof OutboundRefused) this.refused(err);
      throw err;
    }
    const text = await res.text();
    if (res.status !== 200 || text.length > MAX_DISCOVERY_BYTES) {
      throw this.fail("discovery failed");
    }
    let doc: { issuer?: unknown; jwks_uri?: unknown };
    try {
      doc = JSON.parse(text);
    } catch {
      throw this.fail("discovery failed");
    }
    // OIDC Discovery §4.3: a document for another issuer must not be trusted for this one.
    if (typeof doc.issuer !== "string" || !this.matchesIssuer(doc.issuer)) {
      throw this.fail("discovery issuer mismatch");
    }
    if (typeof doc.jwks_uri !== "string" || !URL.canParse(doc.jwks_uri)) {
      throw this.fail("discovery has no jwks_uri");
    }
    return new URL(doc.jwks_uri);
  }
}

class FetchFailed extends Error {}

function isFetchFailure(err: unknown): boolean {
  if (!(err instanceof errors.JOSEError)) return true; // network errors, aborts
  return err instanceof errors.JWKSTimeout || err instanceof errors.JWKSInvalid ||
    err.code === "ERR_JOSE_GENERIC";
}

function reason(err: unknown): string {
  if (err instanceof FetchFailed) return "issuer unavailable";
  if (err instanceof errors.JWTExpired) return "token expired";
  if (err instanceof errors.JWTClaimValidationFailed) return `claim "${err.claim}" invalid`;
  if (err instanceof errors.JOSEAlgNotAllowed) return "algorithm not allowed";
  if (err instanceof errors.JWKSNoMatchingKey) return "no matching key";
  if (err instanceof errors.JWSSignatureVerificationFailed) return "invalid signature";
  return "invalid token";
}

function claimSatisfies(actual: unknown, required: string | string[]): boolean {
  const accepted = Array.isArray(required) ? required : [required];
  const matches = (v: unknown) =>
    (typeof v === "string" || typeof v === "number" || typeof v === "boolean") &&
    accepted.includes(String(v));
  return Array.isArray(actual) ? actual.some(matches) : matches(actual);
}

export class OidcVerifier {
  private readonly providers = new Map<string, Provider>();

  constructor(providers: Map<string, OidcProviderConfig>, opts: OidcVerifierOptions = {}) {
    const resolved: Required<OidcVerifierOptions> = {
      refetchCooldownMs: opts.refetchCooldownMs ?? 30_000,
      cacheMaxAgeMs: opts.cacheMaxAgeMs ?? 600_000,
      timeoutMs: Math.max(1, Math.round(opts.timeoutMs ?? 5_000)),
    };
    for (const [name, cfg] of providers) this.providers.set(name, new Provider(cfg, resolved));
  }

  hasProviders(): boolean {
    return this.providers.size > 0;
  }

  isProvider(name: string): boolean {
    return this.providers.has(name);
  }

  /**
   * With `providerName` (OIDC via Basic) only that provider is tried; otherwise the token's
   * unverified `iss` picks the candidate providers, and the first that verifies it wins.
   */
  async verify(jwt: string, providerName?: string): Promise<Identity> {
    if (jwt.length > MAX_TOKEN_LENGTH) throw new AuthenticationError("oidc: token too large");
    let candidates: Provider[];
    if (providerName !== undefined) {
      const p = this.providers.get(providerName);
      if (!p) throw new AuthenticationError("oidc: unknown provider");
      candidates = [p];
    } else {
      let iss: unknown;
      try {
        iss = decodeJwt(jwt).iss;
      } catch {
        throw new AuthenticationError("oidc: malformed token");
      }
      candidates = typeof iss === "string"
        ? [...this.providers.values()].filter((p) => p.matchesIssuer(iss))
        : [];
      if (candidates.length === 0) throw new AuthenticationError("oidc: no provider for issuer");
    }
    let first: unknown;
    for (const p of candidates) {
      try {
        return await p.verify(jwt);
      } catch (err) {
        first ??= err;
      }
    }
    throw first instanceof AuthenticationError
      ? first
      : new AuthenticationError("oidc: verification failed");
  }
}
