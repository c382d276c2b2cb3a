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

  const server: Deno.HttpServer<Deno.NetAddr> = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen() {},
  }, (req): Response => {
    const path = new URL(req.url).pathname;
    if (path === "/.well-known/openid-configuration") {
      discoveryCount++;
      if (!available) return new Response("unavailable", { status: 503 });
      return Response.json({
        issuer,
        jwks_uri: jwksUri,
        id_token_signing_alg_values_supported: ["RS256", "ES256"],
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
    close: () => server.shutdown(),
  };
}
