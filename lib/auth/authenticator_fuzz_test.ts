// Property fuzzing of the Authorization header (Basic, Bearer registry tokens, OIDC bearer and
// OIDC via Basic): whatever a client sends, the answer is an identity only for a real credential,
// anonymous only for no credential, and otherwise AuthenticationError (401), never another
// error (a 500), in bounded time.
import assert from "node:assert/strict";
import { SignJWT } from "jose";
import { Authenticator } from "./authenticator.ts";
import { AuthenticationError, type Identity } from "./identity.ts";
import { hashPassword } from "./password.ts";
import { TokenService } from "./token_service.ts";
import { defaultConfig } from "../config/mod.ts";
import { startIssuer } from "../../tests/helpers/oidc_issuer.ts";
import {
  assertLinear,
  expectOnly,
  FAST_MS,
  fc,
  fuzzParams,
  mutatedText,
  within,
} from "../../tests/helpers/fuzz.ts";

const USER = "ci";
const PASSWORD = "s3cret";
const BASIC: Identity = { id: "ci-id", username: USER, provider: "basic" };
const SECRET = "a-test-secret-that-is-long-enough-0123456789";
const SERVICE = "wharf.test";

const utf8 = new TextEncoder();
const b64 = (s: string | Uint8Array) =>
  btoa(String.fromCharCode(...(typeof s === "string" ? utf8.encode(s) : s)));

/** The credentials a Basic header carries, decoded independently of the authenticator. */
function basicCredentials(h: string): string | null {
  const m = /^\s*basic\s+([A-Za-z0-9+/]+={0,2})\s*$/i.exec(h);
  if (!m) return null;
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(
      Uint8Array.from(atob(m[1]), (c) => c.charCodeAt(0)),
    );
  } catch {
    return null;
  }
}

interface World {
  auth: Authenticator;
  /** a registry token for the Basic user, and what it carries */
  token: string;
  /** an OIDC token of provider `corp` and its identity */
  oidcToken: string;
  oidcIdentity: Identity;
}

async function withWorld(fn: (w: World) => Promise<void>): Promise<void> {
  const issuer = await startIssuer();
  try {
    const cfg = defaultConfig();
    // cheap argon2 parameters: the property runs thousands of verifies
    const password = await hashPassword(PASSWORD, { memoryCost: 64, timeCost: 1, parallelism: 1 });
    cfg.auth.identities = [{ id: "ci-id", username: USER, password }];
    cfg.auth.tokenService = { secretKey: SECRET, realm: null, service: SERVICE, ttlSecs: 300 };
    cfg.auth.oidc.set("corp", {
      name: "corp",
      issuer: issuer.issuer,
      jwksUri: issuer.jwksUri,
      audience: [],
      requiredClaims: {},
    });
    const auth = new Authenticator(cfg);
    const { token } = await auth.tokens!.issue(BASIC);
    const oidcToken = await issuer.sign({ sub: "user-1" });
    const oidcIdentity = (await auth.authenticate(`Bearer ${oidcToken}`, null)).identity;
    assert.equal(oidcIdentity.provider, "oidc:corp");
    await fn({ auth, token, oidcToken, oidcIdentity });
  } finally {
    await issuer.close();
  }
}

/**
 * Authenticates `h`; fails unless the answer is anonymous for a blank header, an identity only
 * for a credential that is one, or AuthenticationError.
 */
async function judge(w: World, h: string): Promise<Identity | null> {
  let got;
  try {
    got = await within(FAST_MS, "authenticate", () => w.auth.authenticate(h, null));
  } catch (e) {
    expectOnly(e, AuthenticationError);
    assert.ok((e as Error).message.length < 200, "a short reason");
    return null;
  }
  const { identity, method } = got;
  if (h.trim() === "") {
    assert.deepEqual(identity, { provider: "anonymous" });
    return identity;
  }
  switch (method) {
    case "basic":
      assert.deepEqual(identity, BASIC);
      assert.equal(basicCredentials(h), `${USER}:${PASSWORD}`, h);
      break;
    case "token":
      assert.deepEqual(identity, BASIC);
      break;
    case "oidc":
      assert.deepEqual(identity, w.oidcIdentity);
      break;
    default:
      assert.fail(`${method} from ${JSON.stringify(h)}`);
  }
  return identity;
}

Deno.test("fuzz authorization: any header is an identity only for a real credential", async () => {
  await withWorld(async (w) => {
    const valid = [
      `Basic ${b64(`${USER}:${PASSWORD}`)}`,
      `Bearer ${w.token}`,
      `Bearer ${w.oidcToken}`,
      `Basic ${b64(`corp:${w.oidcToken}`)}`,
    ];
    for (const h of valid) assert.ok(await judge(w, h), h);
    const scheme = fc.constantFrom("Basic", "Bearer", "basic", "BEARER", "Digest", "Negotiate", "");
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.string({ maxLength: 100 }),
          fc.tuple(scheme, fc.constantFrom(" ", "  ", "\t", ""), fc.string({ maxLength: 80 }))
            .map(([s, sp, v]) => `${s}${sp}${v}`),
          ...valid.map((h) => mutatedText(h, 6)),
        ),
        (h) => judge(w, h).then(() => {}),
      ),
      fuzzParams(),
    );
  });
});

Deno.test("fuzz authorization: Basic credentials of any bytes never sign in without the password", async () => {
  await withWorld(async (w) => {
    const near = fc.constantFrom(
      "",
      PASSWORD.toUpperCase(),
      PASSWORD + " ",
      " " + PASSWORD,
      PASSWORD + "\0",
      PASSWORD.slice(0, -1),
      PASSWORD + ":",
      PASSWORD + PASSWORD,
    );
    const user = fc.constantFrom(USER, "CI", " ci", "ci ", "ci\0", "corp", "", "ci-id", USER + ":");
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.uint8Array({ maxLength: 64 }).map((b) => `Basic ${b64(b)}`),
          fc.tuple(user, fc.oneof(near, fc.string({ maxLength: 30 })))
            .map(([u, p]) => `Basic ${b64(`${u}:${p}`)}`),
          // padding and alphabet near misses of base64 itself
          fc.tuple(fc.string({ maxLength: 30 }), fc.constantFrom("", "=", "==", "===", "-_", "."))
            .map(([s, tail]) => `Basic ${b64(s).replace(/=+$/, "")}${tail}`),
        ),
        async (h) => {
          const id = await judge(w, h);
          if (id !== null) assert.equal(basicCredentials(h), `${USER}:${PASSWORD}`);
        },
      ),
      fuzzParams(0.5),
    );
  });
});

Deno.test("fuzz authorization: a bearer token signed any other way never passes", async () => {
  await withWorld(async (w) => {
    const now = Math.floor(Date.now() / 1000);
    const claims = fc.record({
      iss: fc.constantFrom(SERVICE, "other", ""),
      aud: fc.constantFrom(SERVICE, "other"),
      iat: fc.constantFrom(now, now + 3600, now - 3600),
      exp: fc.constantFrom(now + 60, now - 60),
      jti: fc.constantFrom("j"),
      idv: fc.constantFrom(2, 1, "2"),
      provider: fc.constantFrom("basic", "oidc:corp", "mtls", "oidc:", "corp"),
      username: fc.constantFrom(USER, "admin"),
    }, { requiredKeys: [] });
    const header = fc.record({
      alg: fc.constantFrom("HS256", "HS384", "HS512"),
      typ: fc.constantFrom("svc+jwt", "application/svc+jwt", "JWT", "SVC+JWT"),
    });
    const otherKey = fc.string({ minLength: 1, maxLength: 40 }).filter((k) => k !== SECRET);
    await fc.assert(
      fc.asyncProperty(claims, header, otherKey, async (c, hd, key) => {
        const jwt = await new SignJWT(c).setProtectedHeader(hd).sign(utf8.encode(key));
        assert.equal(await judge(w, `Bearer ${jwt}`), null, JSON.stringify([c, hd, key]));
        // unsigned, whatever it claims
        const [head, body] = jwt.split(".");
        const none = b64(JSON.stringify({ alg: "none", typ: hd.typ })).replace(/=+$/, "");
        for (const t of [`${none}.${body}.`, `${head}.${body}.`, `${head}.${body}`]) {
          assert.equal(await judge(w, `Bearer ${t}`), null, t);
        }
      }),
      fuzzParams(0.5),
    );
    // TokenService.isRegistryToken decides the path without verifying: it never throws
    fc.assert(
      fc.property(fc.string({ maxLength: 200 }), (s) => {
        TokenService.isRegistryToken(s);
        TokenService.isRegistryToken(`${b64(s)}.${b64(s)}.${b64(s)}`);
      }),
      fuzzParams(),
    );
  });
});

Deno.test("fuzz authorization: a megabyte header is refused in linear time", async () => {
  await withWorld(async (w) => {
    const refuse = async (h: string) => {
      await assert.rejects(w.auth.authenticate(h, null), AuthenticationError);
    };
    const shapes: [string, (n: number) => string][] = [
      ["Basic A…", (n) => "Basic " + "A".repeat(n)],
      ["Bearer a.", (n) => "Bearer " + "a.".repeat(n / 2)],
      ["spaces", (n) => "Basic" + " ".repeat(n) + "x y"],
      ["words", (n) => "Basic x ".repeat(n / 8)],
    ];
    for (const [what, make] of shapes) await assertLinear(`Authorization ${what}`, make, refuse);
    // at the size limit (16 KiB) every shape is parsed: still fast
    for (const [what, make] of shapes) {
      await within(FAST_MS, what, () => judge(w, make(16 * 1024 - 16)));
    }
    const blank = " ".repeat(1024 * 1024);
    assert.deepEqual((await w.auth.authenticate(blank, null)).identity, { provider: "anonymous" });
  });
});
