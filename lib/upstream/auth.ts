// The registry auth dance: anonymous first; a 401's challenge says how to authenticate (Basic
// with the configured credentials, or a Bearer token from the realm it names). What was learned
// is kept, so later requests authenticate up front instead of collecting a 401 each.
import { ChallengeSyntaxError, parseChallenges } from "./challenge.ts";
import { mayReceiveCredentials } from "./credential_scope.ts";
import { isUpstreamError, type UpstreamError } from "./errors.ts";
import type { IssuedToken, TokenCache } from "./token_cache.ts";
import { describeUrl, readBounded, type Transport } from "./transport.ts";

export interface Credentials {
  username: string;
  password: string;
}

const TOKEN_RESPONSE_MAX_BYTES = 64 * 1024;
const DEFAULT_TOKEN_SECS = 60;

function basicHeader(c: Credentials): string {
  // btoa takes Latin-1 only; RFC 7617 credentials are UTF-8.
  const bytes = new TextEncoder().encode(`${c.username}:${c.password}`);
  return `Basic ${btoa(Array.from(bytes, (b) => String.fromCharCode(b)).join(""))}`;
}

export class Authenticator {
  private scheme: "basic" | "bearer" | null = null;
  private bearer: { realm: URL; service: string | null } | null = null;

  constructor(
    private readonly t: Transport,
    private readonly upstream: URL,
    private readonly creds: Credentials | null,
    private readonly tokens: TokenCache,
    private readonly observeToken: (outcome: UpstreamError | null, started: number) => void,
  ) {}

  /** Authorization for a first attempt, from what earlier challenges taught. */
  async preemptive(scope: string): Promise<string | null> {
    if (this.scheme === "basic" && this.creds) return basicHeader(this.creds);
    if (this.scheme === "bearer" && this.bearer) return `Bearer ${await this.token(scope)}`;
    return null;
  }

  /**
   * Authorization to retry a request that got 401 with `challenge`, having sent `sent`.
   * Throws `denied` when retrying cannot help, `invalid` for a malformed challenge.
   */
  async answer(challenge: string | null, scope: string, sent: string | null, what: string) {
    if (challenge === null) {
      throw this.t.error("denied", `${what}: 401 without a WWW-Authenticate challenge`, {
        status: 401,
      });
    }
    let challenges;
    try {
      challenges = parseChallenges(challenge);
    } catch (e) {
      if (!(e instanceof ChallengeSyntaxError)) throw e;
      throw this.t.error("invalid", `${what}: ${e.message}`, { status: 401 });
    }
    const bearer = challenges.find((c) => c.scheme === "bearer");
    if (bearer) {
      const realm = bearer.params.realm;
      let url: URL | null = null;
      try {
        url = realm ? new URL(realm) : null;
      } catch { /* reported below */ }
      if (!url || (url.protocol !== "https:" && url.protocol !== "http:")) {
        throw this.t.error(
          "invalid",
          `${what}: Bearer challenge without an http(s) realm (${realm ?? "none"})`,
          { status: 401 },
        );
      }
      this.scheme = "bearer";
      this.bearer = { realm: url, service: bearer.params.service ?? null };
      if (sent?.startsWith("Bearer ")) {
        this.tokens.delete(this.upstream.href, scope, sent.slice("Bearer ".length));
      }
      return `Bearer ${await this.token(scope)}`;
    }
    const basic = challenges.find((c) => c.scheme === "basic");
    if (basic) {
      if (!this.creds) {
        throw this.t.error("denied", `${what}: Basic credentials required, none configured`, {
          status: 401,
        });
      }
      if (sent?.startsWith("Basic ")) {
        throw this.t.error("denied", `${what}: the configured credentials were refused`, {
          status: 401,
        });
      }
      this.scheme = "basic";
      return basicHeader(this.creds);
    }
    const schemes = challenges.map((c) => c.scheme).join(", ");
    throw this.t.error("denied", `${what}: no supported auth scheme offered (${schemes})`, {
      status: 401,
    });
  }

  private token(scope: string): Promise<string> {
    const { realm, service } = this.bearer!;
    return this.tokens.getOrFetch(
      this.upstream.href,
      scope,
      () => this.fetchToken(realm, service, scope),
    );
  }

  private async fetchToken(realm: URL, service: string | null, scope: string) {
    const started = performance.now();
    try {
      const issued = await this.requestToken(realm, service, scope);
      this.observeToken(null, started);
      return issued;
    } catch (e) {
      if (isUpstreamError(e)) this.observeToken(e, started);
      throw e;
    }
  }

  private async requestToken(
    realm: URL,
    service: string | null,
    scope: string,
  ): Promise<IssuedToken> {
    const url = new URL(realm);
    if (service !== null) url.searchParams.append("service", service);
    url.searchParams.append("scope", scope);
    const what = `token request to ${describeUrl(realm)}`;
    // A realm elsewhere still gets asked, anonymously: public images need no password.
    const withCreds = this.creds !== null && await mayReceiveCredentials(realm, this.upstream);
    const ex = await this.t.send({
      method: "GET",
      url,
      headers: { accept: "application/json" },
      authorization: withCreds ? basicHeader(this.creds!) : null,
      authOrigin: realm.origin,
      what,
    });
    if (ex.response.status !== 200) {
      await ex.discard();
      throw this.t.statusError(what, ex.response);
    }
    const type = ex.response.headers.get("content-type") ?? "no Content-Type";
    const bytes = await readBounded(this.t, ex, TOKEN_RESPONSE_MAX_BYTES, what);
    let doc: unknown;
    try {
      doc = JSON.parse(new TextDecoder().decode(bytes));
    } catch {
      throw this.t.error("invalid", `${what}: answer is not JSON (${type})`);
    }
    const d = (typeof doc === "object" && doc !== null ? doc : {}) as Record<string, unknown>;
    const token = typeof d.token === "string" && d.token !== ""
      ? d.token
      : typeof d.access_token === "string" && d.access_token !== ""
      ? d.access_token
      : null;
    if (token === null) throw this.t.error("invalid", `${what}: answer carries no token`);
    // It goes into a header verbatim: a control character would make fetch throw a TypeError.
    if (!/^[\x21-\x7e]+$/.test(token)) {
      throw this.t.error("invalid", `${what}: the token is not a valid header value`);
    }
    const e = d.expires_in;
    const expiresInSecs = typeof e === "number" && Number.isFinite(e) && e > 0
      ? e
      : DEFAULT_TOKEN_SECS;
    return { token, expiresInSecs };
  }
}
