// Registry bearer tokens handed out by `GET /token`: HS256 JWTs of type `svc+jwt` carrying the
// identity only. The client certificate and IP are never embedded: they come from the live
// request, so a token cannot replay them.
import { decodeProtectedHeader, errors as joseErrors, jwtVerify, SignJWT } from "jose";
import type { TokenServiceConfig } from "../config/mod.ts";
import { AuthenticationError, type Identity } from "./identity.ts";

export const REGISTRY_TOKEN_TYPE = "svc+jwt";
const ALG = "HS256";
/**
 * The identity layout of the tokens issued now (claim `idv`). Tokens without it were issued
 * before identities carried their provider: their OIDC usernames came from preferred_username
 * and their provider was a bare provider name (which could be "basic"), so they are refused
 * (401: clients fetch a new token) rather than read as a Basic user of the same name.
 */
const IDENTITY_VERSION = 2;
const PROVIDER = /^(basic|mtls|anonymous|oidc:[^:]+)$/;
/** Identity fields and the claims they travel in (`iss` is the token's own issuer). */
const IDENTITY_CLAIMS = [["id", "id"], ["username", "username"], ["issuer", "idp_issuer"]] as const;

/** jose compares `typ` case-insensitively and without an `application/` prefix; so does this. */
function normalizeTyp(typ: string): string {
  return typ.toLowerCase().replace(/^application\//, "");
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

export class TokenService {
  readonly #cfg: TokenServiceConfig;
  readonly #key: Uint8Array;

  constructor(cfg: TokenServiceConfig) {
    if (!cfg.secretKey) throw new Error("auth.token_service.secret_key must not be empty");
    if (!(Number.isInteger(cfg.ttlSecs) && cfg.ttlSecs > 0)) {
      throw new Error("auth.token_service.ttl_secs must be a positive integer");
    }
    this.#cfg = cfg;
    this.#key = new TextEncoder().encode(cfg.secretKey);
  }

  async issue(identity: Identity): Promise<{ token: string; expires_in: number }> {
    const claims: Record<string, unknown> = {
      idv: IDENTITY_VERSION,
      provider: identity.provider ?? "anonymous",
    };
    if (identity.id !== undefined) claims.id = identity.id;
    if (identity.username !== undefined) claims.username = identity.username;
    if (identity.issuer !== undefined) claims.idp_issuer = identity.issuer;
    if (identity.claims !== undefined) claims.claims = identity.claims;
    const iat = Math.floor(Date.now() / 1000);
    const ttl = this.#cfg.ttlSecs;
    const token = await new SignJWT(claims)
      .setProtectedHeader({ alg: ALG, typ: REGISTRY_TOKEN_TYPE })
      .setIssuer(this.#cfg.service)
      .setAudience(this.#cfg.service)
      .setIssuedAt(iat)
      .setExpirationTime(iat + ttl)
      .setJti(crypto.randomUUID())
      .sign(this.#key);
    return { token, expires_in: ttl };
  }

  /** Whether the token declares itself a registry token; decoded, not verified. Never throws. */
  static isRegistryToken(jwt: string): boolean {
    if (typeof jwt !== "string" || jwt.split(".").length !== 3) return false;
    try {
      const { typ } = decodeProtectedHeader(jwt);
      return typeof typ === "string" && normalizeTyp(typ) === REGISTRY_TOKEN_TYPE;
    } catch {
      return false;
    }
  }

  /** The identity a valid token carries; any defect throws AuthenticationError. */
  async verify(jwt: string): Promise<Identity> {
    let payload: Record<string, unknown>;
    try {
      ({ payload } = await jwtVerify(jwt, this.#key, {
        algorithms: [ALG],
        typ: REGISTRY_TOKEN_TYPE,
        issuer: this.#cfg.service,
        audience: this.#cfg.service,
        requiredClaims: ["iat", "exp", "jti"],
        // Bounds a token's life by the current ttl, even if it was signed under a longer one.
        maxTokenAge: this.#cfg.ttlSecs,
      }));
    } catch (e) {
      const why = e instanceof joseErrors.JOSEError ? e.code : "malformed token";
      throw new AuthenticationError(`invalid registry token: ${why}`);
    }
    if (payload.idv !== IDENTITY_VERSION) {
      throw new AuthenticationError(
        "invalid registry token: issued before identities carried their provider; fetch a new one",
      );
    }
    if (typeof payload.provider !== "string" || !PROVIDER.test(payload.provider)) {
      throw new AuthenticationError("invalid registry token: provider");
    }
    const identity: Identity = { provider: payload.provider };
    for (const [k, claim] of IDENTITY_CLAIMS) {
      const v = payload[claim];
      if (v === undefined) continue;
      if (typeof v !== "string") throw new AuthenticationError(`invalid registry token: ${claim}`);
      identity[k] = v;
    }
    if (payload.claims !== undefined) {
      if (!isPlainObject(payload.claims)) {
        throw new AuthenticationError("invalid registry token: claims");
      }
      identity.claims = payload.claims;
    }
    return identity;
  }
}
