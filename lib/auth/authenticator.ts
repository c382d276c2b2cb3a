// Turns a request's credentials into an Identity. Order (DESIGN.md): the TLS client certificate
// is read from the live connection; then the Authorization header: a registry token
// (`svc+jwt`), another bearer token (OIDC), Basic (OIDC via Basic when the username names a
// provider). No credentials → anonymous. Credentials that are presented and wrong → 401.
import type { Config } from "../config/mod.ts";
import {
  ANONYMOUS,
  AuthenticationError,
  type CertificateSubject,
  type Identity,
  type RefusedCertificate,
} from "./identity.ts";
import { BasicAuthenticator } from "./basic.ts";
import { OidcVerifier } from "./oidc.ts";
import { TokenService } from "./token_service.ts";

export type AuthMethod = "anonymous" | "basic" | "oidc" | "token" | "mtls";

export interface AuthResult {
  identity: Identity;
  method: AuthMethod;
}

/** Larger Authorization headers are refused before any parsing or crypto. */
const MAX_AUTHORIZATION = 16 * 1024;

export class Authenticator {
  readonly tokens: TokenService | null;
  private readonly basic: BasicAuthenticator;
  private readonly oidc: OidcVerifier;

  constructor(cfg: Config) {
    this.basic = new BasicAuthenticator(cfg.auth.identities);
    this.oidc = new OidcVerifier(cfg.auth.oidc);
    this.tokens = cfg.auth.tokenService ? new TokenService(cfg.auth.tokenService) : null;
  }

  async authenticate(
    authorization: string | null,
    peer: CertificateSubject | RefusedCertificate | null,
  ): Promise<AuthResult> {
    // A certificate presented and not verified is a wrong credential, like a wrong password.
    if (peer !== null && "refused" in peer) {
      throw new AuthenticationError(`client certificate refused: ${peer.refused}`);
    }
    const certificate = peer;
    const withCert = (r: AuthResult): AuthResult =>
      certificate ? { ...r, identity: { ...r.identity, certificate } } : r;
    if (authorization === null || authorization.trim() === "") {
      if (!certificate) return { identity: { ...ANONYMOUS }, method: "anonymous" };
      const cn = certificate.common_name;
      return {
        identity: { ...(cn ? { id: cn, username: cn } : {}), provider: "mtls", certificate },
        method: "mtls",
      };
    }
    if (authorization.length > MAX_AUTHORIZATION) {
      throw new AuthenticationError("Authorization header too large");
    }
    const m = /^\s*([A-Za-z]+)\s+(\S+)\s*$/.exec(authorization);
    if (!m) throw new AuthenticationError("malformed Authorization header");
    const scheme = m[1].toLowerCase();
    const value = m[2];
    if (scheme === "bearer") {
      if (this.tokens && TokenService.isRegistryToken(value)) {
        return withCert({ identity: await this.tokens.verify(value), method: "token" });
      }
      if (!this.oidc.hasProviders()) throw new AuthenticationError("bearer token not accepted");
      return withCert({ identity: await this.oidc.verify(value), method: "oidc" });
    }
    if (scheme === "basic") {
      const [username, password] = decodeBasic(value);
      if (this.oidc.isProvider(username)) {
        return withCert({ identity: await this.oidc.verify(password, username), method: "oidc" });
      }
      const identity = await this.basic.verify(username, password);
      if (!identity) throw new AuthenticationError("invalid username or password");
      return withCert({ identity, method: "basic" });
    }
    throw new AuthenticationError("unsupported authorization scheme");
  }
}

function decodeBasic(b64: string): [string, string] {
  let text: string;
  try {
    if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) throw new Error();
    const bin = atob(b64);
    text = new TextDecoder("utf-8", { fatal: true }).decode(
      Uint8Array.from(bin, (c) => c.charCodeAt(0)),
    );
  } catch {
    throw new AuthenticationError("malformed Basic credentials");
  }
  const i = text.indexOf(":");
  if (i < 0) throw new AuthenticationError("malformed Basic credentials");
  return [text.slice(0, i), text.slice(i + 1)];
}
