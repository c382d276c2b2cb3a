// A minimal OpenID provider for tests: discovery document + JWKS over real HTTP on 127.0.0.1,
// with real RS256/ES256 keys, so verifiers are exercised exactly as against a production issuer.

import { exportJWK, exportSPKI, generateKeyPair, type JWK, SignJWT } from "jose";

export interface SignOptions {
  /** header kid; a kid the JWKS does not publish still signs with the alg's current key */
  kid?: string;
  /**
   * RS256 (default) or ES256 with real keys. Attack shapes: `none` gives an unsigned token, and
   * `HS256` signs with the current RSA public key's SPKI PEM as the HMAC secret.
   */
  alg?: string;
  /** span relative to now ("5m", "-1h", "30s") or absolute epoch seconds; default "5m" */
  expiresIn?: string | number;
  /** extra protected-header fields, applied last */
  header?: Record<string, unknown>;
}

export interface TestIssuer {
  /** `http://127.0.0.1:<port>` — also the `iss` of every signed token unless overridden */
  issuer: string;
  jwksUri: string;
  sign(claims: Record<string, unknown>, opts?: SignOptions): Promise<string>;
  /** publishes a fresh RSA key and makes it the RS256 signing key; the old one stays published */
  rotateKey(): Promise<string>;
  jwksFetches(): number;
  discoveryFetches(): number;
  /** false: discovery and JWKS answer 503 (still counted), simulating an issuer outage */
  setAvailable(up: boolean): void;
  /**
   * The user the authorization endpoint signs in (it asks nothing: the test decides who logs in);
   * the ID token carries these claims plus iss, aud = client_id, nonce and exp.
   */
  setLoginClaims(claims: Record<string, unknown>): void;
  /** code exchanges answered, and refused for a wrong PKCE verifier, so far */
  codeExchanges(): { ok: number; badVerifier: number };
  close(): Promise<void>;
}

interface SigningKey {
  kid: string;
  alg: "RS256" | "ES256";
  privateKey: CryptoKey;
  publicKey: CryptoKey;
  jwk: JWK;
}

async function newKey(alg: "RS256" | "ES256", kid: string): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid, alg, use: "sig" };
  return { kid, alg, privateKey, publicKey, jwk };
}

function b64url(data: string | Uint8Array): string {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

const UNIT_SECS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };

/** "5m", "-1h", "30s" relative to now; a number is an absolute epoch-seconds `exp` */
function expiry(span: string | number, now: number): number {
  if (typeof span === "number") return span;
  const m = /^(-?)(\d+)\s*([smhd])$/.exec(span.trim());
  if (!m) throw new Error(`bad expiresIn ${span}`);
  return now + (m[1] ? -1 : 1) * Number(m[2]) * UNIT_SECS[m[3]];
}

export async function startIssuer(): Promise<TestIssuer> {
  const published: SigningKey[] = [await newKey("RS256", "rsa-1"), await newKey("ES256", "ec-1")];
  const current: Record<"RS256" | "ES256", SigningKey> = {
    RS256: published[0],
    ES256: published[1],
  };
  let rotations = 0;
  let jwksCount = 0;
  let discoveryCount = 0;
  let available = true;
  let loginClaims: Record<string, unknown> = { sub: "user-1", preferred_username: "alice" };
  const exchanges = { ok: 0, badVerifier: 0 };
  // code → what the authorization request bound to it
  const codes = new Map<
    string,
    { challenge: string; clientId: string; redirectUri: string; nonce: string | null }
  >();
  const cors = { "access-control-allow-origin": "*" };

  const server: Deno.HttpServer<Deno.NetAddr> = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen() {},
  }, async (req): Promise<Response> => {
    const url = new URL(req.url);
    const path = url.pathname;
    if (path === "/.well-known/openid-configuration") {
      discoveryCount++;
      if (!available) return new Response("unavailable", { status: 503, headers: cors });
      return Response.json({
        issuer,
        jwks_uri: jwksUri,
        authorization_endpoint: `${issuer}/authorize`,
        token_endpoint: `${issuer}/oauth/token`,
        code_challenge_methods_supported: ["S256"],
        id_token_signing_alg_values_supported: ["RS256", "ES256"],
      }, { headers: cors });
    }
    if (path === "/authorize") {
      // A public client's authorization code request with PKCE; the login itself is implied.
      const q = url.searchParams;
      const redirect = q.get("redirect_uri");
      if (!redirect || q.get("response_type") !== "code" || !q.get("client_id")) {
        return new Response("bad authorization request", { status: 400 });
      }
      if (q.get("code_challenge_method") !== "S256" || !q.get("code_challenge")) {
        return new Response("PKCE with S256 is required", { status: 400 });
      }
      const code = crypto.randomUUID();
      codes.set(code, {
        challenge: q.get("code_challenge")!,
        clientId: q.get("client_id")!,
        redirectUri: redirect,
        nonce: q.get("nonce"),
      });
      const back = new URL(redirect);
      back.searchParams.set("code", code);
      if (q.get("state") !== null) back.searchParams.set("state", q.get("state")!);
      return new Response(null, { status: 302, headers: { location: back.toString() } });
    }
    if (path === "/oauth/token") {
      if (req.method === "OPTIONS") {
        return new Response(null, {
          status: 204,
          headers: { ...cors, "access-control-allow-headers": "content-type" },
        });
      }
      const form = new URLSearchParams(await req.text());
      const bound = codes.get(form.get("code") ?? "");
      const fail = (error: string) => Response.json({ error }, { status: 400, headers: cors });
      if (form.get("grant_type") !== "authorization_code" || !bound) return fail("invalid_grant");
      codes.delete(form.get("code")!);
      if (
        form.get("client_id") !== bound.clientId || form.get("redirect_uri") !== bound.redirectUri
      ) {
        return fail("invalid_grant");
      }
      const digest = new Uint8Array(
        await crypto.subtle.digest(
          "SHA-256",
          new TextEncoder().encode(form.get("code_verifier") ?? ""),
        ),
      );
      if (b64url(digest) !== bound.challenge) {
        exchanges.badVerifier++;
        return fail("invalid_grant");
      }
      exchanges.ok++;
      // the login claims come last so a test can make the issuer answer a wrong nonce
      const idToken = await sign({
        aud: bound.clientId,
        ...(bound.nonce ? { nonce: bound.nonce } : {}),
        ...loginClaims,
      });
      return Response.json({ id_token: idToken, token_type: "Bearer", expires_in: 300 }, {
        headers: cors,
      });
    }
    if (path === "/jwks") {
      jwksCount++;
      if (!available) return new Response("unavailable", { status: 503 });
      return Response.json({ keys: published.map((k) => k.jwk) });
    }
    return new Response("not found", { status: 404 });
  });
  const issuer: string = `http://127.0.0.1:${server.addr.port}`;
  const jwksUri = `${issuer}/jwks`;

  async function sign(claims: Record<string, unknown>, opts: SignOptions = {}): Promise<string> {
    const alg = opts.alg ?? "RS256";
    const now = Math.floor(Date.now() / 1000);
    const payload: Record<string, unknown> = { iss: issuer, iat: now, ...claims };
    if (!("exp" in claims)) payload.exp = expiry(opts.expiresIn ?? "5m", now);

    if (alg === "none" || alg === "HS256") {
      const header = { alg, typ: "JWT", kid: opts.kid ?? current.RS256.kid, ...opts.header };
      const input = `${b64url(JSON.stringify(header))}.${b64url(JSON.stringify(payload))}`;
      if (alg === "none") return `${input}.`;
      const secret = new TextEncoder().encode(await exportSPKI(current.RS256.publicKey));
      const hmac = await crypto.subtle.importKey(
        "raw",
        secret,
        { name: "HMAC", hash: "SHA-256" },
        false,
        ["sign"],
      );
      const sig = await crypto.subtle.sign("HMAC", hmac, new TextEncoder().encode(input));
      return `${input}.${b64url(new Uint8Array(sig))}`;
    }
    if (alg !== "RS256" && alg !== "ES256") throw new Error(`test issuer cannot sign ${alg}`);
    const key = current[alg];
    return await new SignJWT(payload)
      .setProtectedHeader({ alg, typ: "JWT", kid: opts.kid ?? key.kid, ...opts.header })
      .sign(key.privateKey);
  }

  return {
    issuer,
    jwksUri,
    sign,
    async rotateKey() {
      const key = await newKey("RS256", `rsa-rotated-${++rotations}`);
      published.push(key);
      current.RS256 = key;
      return key.kid;
    },
    jwksFetches: () => jwksCount,
    discoveryFetches: () => discoveryCount,
    setAvailable(up: boolean) {
      available = up;
    },
    setLoginClaims(claims: Record<string, unknown>) {
      loginClaims = claims;
    },
    codeExchanges: () => ({ ...exchanges }),
    close: () => server.shutdown(),
  };
}
