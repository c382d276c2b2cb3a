// docs/auth.md §OIDC providers against a real Wharf process and real local issuers
// (tests/helpers/oidc_issuer.ts): RS256/ES256 bearer and OIDC-via-Basic, every rejection shape
// (401 with a challenge, never 5xx), the unknown-kid refetch and key rotation, issuer outages, and
// the identity fields CEL sees (each proven by a rule that only grants on the right value).
import assert from "node:assert/strict";
import { assertError, req, serverTestOpts } from "../helpers/api.ts";
import { startIssuer, type TestIssuer } from "../helpers/oidc_issuer.ts";
import { type TestServer, withServer } from "../helpers/server.ts";

/** The server's JWKS refetch cooldown (docs/auth.md: "at most one refetch per cooldown (30 s)"). */
const COOLDOWN_MS = 30_000;

const toml = (v: unknown) => JSON.stringify(v);

function config(i: Record<string, TestIssuer>): string {
  return `
[auth.oidc.corp]
issuer = ${toml(i.corp.issuer)}
jwks_uri = ${toml(i.corp.jwksUri)}
audience = "wharf"
required_claims = { tier = ["gold", "silver"] }

# no jwks_uri: discovered from <issuer>/.well-known/openid-configuration
[auth.oidc.disc]
issuer = ${toml(i.disc.issuer)}
audience = ["wharf", "wharf-alt"]

[auth.oidc.kid]
issuer = ${toml(i.kid.issuer)}
jwks_uri = ${toml(i.kid.jwksUri)}

[auth.oidc.rot]
issuer = ${toml(i.rot.issuer)}

[auth.oidc.down]
issuer = ${toml(i.down.issuer)}
jwks_uri = ${toml(i.down.jwksUri)}

[auth.oidc.downd]
issuer = ${toml(i.downd.issuer)}

[global.access_policy]
default = "deny"
rules = [
  'request.action in ["healthz", "readyz", "get-api-version"]',
  'request.namespace == "ops/app" && has(identity.provider) && identity.provider == "oidc:corp" && has(identity.claims.groups) && "ops" in identity.claims.groups',
  'request.namespace == "who/alice" && has(identity.username) && identity.username == "alice" && has(identity.id) && identity.id == "sub-alice"',
  'request.namespace == "who/email" && has(identity.username) && identity.username == "bob@example.com" && identity.id == "sub-bob"',
  'request.namespace == "who/sub" && has(identity.username) && identity.username == "sub-carol" && identity.id == "sub-carol"',
  'request.namespace == "claims/tier" && has(identity.claims.tier) && identity.claims.tier == "silver" && identity.claims.level == 3',
  'request.namespace == "disc/app" && has(identity.provider) && identity.provider == "oidc:disc"',
  'request.namespace == "any/app" && has(identity.provider) && identity.provider in ["oidc:kid", "oidc:rot", "oidc:down", "oidc:downd"]',
]
`;
}

const bearer = (jwt: string) => ({ authorization: `Bearer ${jwt}` });
const basic = (user: string, pass: string) => ({
  authorization: `Basic ${btoa(`${user}:${pass}`)}`,
});

function tags(s: TestServer, ns: string, headers: Record<string, string> = {}): Promise<Response> {
  return req(s, `/v2/${ns}/tags/list`, { headers });
}

/** Authorized: the policy let the request through to a repository that does not exist. */
async function assertAllowed(r: Response, what: string): Promise<void> {
  assert.equal(r.status, 404, `${what}: expected the route (404 NAME_UNKNOWN), got ${r.status}`);
  await assertError(r, 404, "NAME_UNKNOWN");
}

async function assertUnauthorized(r: Response, what: string): Promise<void> {
  const challenge = r.headers.get("www-authenticate");
  assert.equal(r.status, 401, `${what}: ${r.status} ${await r.clone().text()}`);
  assert.ok(challenge, `${what}: 401 without WWW-Authenticate`);
  assert.match(challenge, /^Basic realm="wharf"/, what);
  await assertError(r, 401, "UNAUTHORIZED");
}

async function assertDenied(r: Response, what: string): Promise<void> {
  assert.equal(r.status, 403, `${what}: ${r.status} ${await r.clone().text()}`);
  await assertError(r, 403, "DENIED");
}

/**
 * Credentials rejected: 401 even on /v2/, which the policy grants to anonymous callers, so only
 * the failed authentication explains it; and 401 (not 403) on a namespace the claims would open.
 */
async function assertRejected(
  s: TestServer,
  headers: Record<string, string>,
  what: string,
  ns = "ops/app",
): Promise<void> {
  await assertUnauthorized(await req(s, "/v2/", { headers }), `${what} on /v2/`);
  await assertUnauthorized(await tags(s, ns, headers), `${what} on ${ns}`);
}

const OPS = { sub: "sub-ops", aud: "wharf", tier: "gold", groups: ["ops", "dev"] };

Deno.test({
  name: "OIDC: bearer and Basic against real issuers, rejections, refetch, rotation, outages",
  ...serverTestOpts,
  fn: async (t) => {
    const names = ["corp", "disc", "kid", "rot", "down", "downd"];
    const issuers: Record<string, TestIssuer> = {};
    try {
      for (const n of names) issuers[n] = await startIssuer();
      const { corp, disc, kid, rot, down, downd } = issuers;
      down.setAvailable(false);
      downd.setAvailable(false);

      await withServer({ config: config(issuers) }, async (s) => {
        // The refetch and rotation cases need the cooldown since each provider's first JWKS
        // fetch to pass; prime them now and run every other case while it runs out.
        await t.step(
          "first tokens of the kid and rot providers fetch their JWKS once",
          async () => {
            for (const is of [kid, rot]) {
              await assertAllowed(
                await tags(s, "any/app", bearer(await is.sign({ sub: "prime" }))),
                "priming",
              );
              assert.equal(is.jwksFetches(), 1);
            }
          },
        );
        const primedAt = performance.now();

        await t.step("issuer unavailable → 401, not 5xx", async () => {
          await assertRejected(
            s,
            bearer(await down.sign({ sub: "d" })),
            "JWKS answering 503",
            "any/app",
          );
          assert.ok(down.jwksFetches() >= 1, "the JWKS was asked");
          await assertRejected(
            s,
            bearer(await downd.sign({ sub: "d" })),
            "discovery answering 503",
            "any/app",
          );
          assert.ok(downd.discoveryFetches() >= 1, "discovery was asked");
          // a later recovery is picked up once the cooldown allows another fetch (checked below)
          down.setAvailable(true);
          downd.setAvailable(true);
        });
        const outageSeenAt = performance.now();

        await t.step(
          "anonymous: /v2/ allowed, a protected namespace 401 with challenge",
          async () => {
            const v2 = await req(s, "/v2/");
            assert.equal(v2.status, 200);
            await v2.body?.cancel();
            await assertUnauthorized(await tags(s, "ops/app"), "anonymous ops/app");
          },
        );

        await t.step("valid RS256 bearer with the ops group is allowed", async () => {
          const jwt = await corp.sign(OPS);
          await assertAllowed(await tags(s, "ops/app", bearer(jwt)), "RS256");
          // a scheme is case-insensitive
          await assertAllowed(
            await tags(s, "ops/app", { authorization: `bearer ${jwt}` }),
            "lower-case bearer",
          );
          assert.equal(corp.jwksFetches(), 1, "JWKS fetched once, then cached");
          assert.equal(corp.discoveryFetches(), 0, "jwks_uri given: no discovery");
        });

        await t.step("valid ES256 bearer is allowed", async () => {
          const jwt = await corp.sign(OPS, { alg: "ES256" });
          await assertAllowed(await tags(s, "ops/app", bearer(jwt)), "ES256");
        });

        await t.step("OIDC via Basic: username = provider name, password = JWT", async () => {
          const jwt = await corp.sign(OPS);
          await assertAllowed(await tags(s, "ops/app", basic("corp", jwt)), "Basic corp");
          // another provider's name routes the JWT to that provider only, which refuses it
          await assertRejected(s, basic("disc", jwt), "Basic disc with a corp token");
        });

        await t.step("discovered provider: jwks_uri read from the discovery document", async () => {
          await assertAllowed(
            await tags(s, "disc/app", bearer(await disc.sign({ sub: "d", aud: "wharf-alt" }))),
            "disc with the second configured audience",
          );
          assert.ok(disc.discoveryFetches() >= 1, "discovery document fetched");
          assert.equal(disc.jwksFetches(), 1);
          // the provider is part of the identity: disc is not corp, even with the ops group
          const jwt = await disc.sign({ sub: "d", aud: "wharf", groups: ["ops"] });
          await assertDenied(await tags(s, "ops/app", bearer(jwt)), "disc token on ops/app");
        });

        await t.step("a valid token whose identity the policy denies → 403 DENIED", async () => {
          const jwt = await corp.sign({ ...OPS, groups: ["dev"] });
          const r = await tags(s, "ops/app", bearer(jwt));
          assert.equal(r.headers.get("www-authenticate"), null, "403 carries no challenge");
          await assertDenied(r, "dev group on ops/app");
          // the rule guards groups with has(): a token without it is denied, not an error
          const { groups: _, ...noGroups } = OPS;
          await assertDenied(
            await tags(s, "ops/app", bearer(await corp.sign(noGroups))),
            "no groups",
          );
        });

        await t.step("identity.username: the sub, never preferred_username or email", async () => {
          const base = { aud: "wharf", tier: "gold" };
          // preferred_username is the user's own choice (docs/auth.md): it names nobody
          await assertDenied(
            await tags(
              s,
              "who/alice",
              bearer(
                await corp.sign({
                  ...base,
                  sub: "sub-alice",
                  preferred_username: "alice",
                  email: "a@example.com",
                }),
              ),
            ),
            "preferred_username is not the username",
          );
          await assertDenied(
            await tags(
              s,
              "who/alice",
              bearer(await corp.sign({ ...base, sub: "sub-mallory", preferred_username: "alice" })),
            ),
            "identity.id is the sub",
          );
          await assertDenied(
            await tags(
              s,
              "who/email",
              bearer(
                await corp.sign({
                  ...base,
                  sub: "sub-bob",
                  email: "bob@example.com",
                  email_verified: true,
                }),
              ),
            ),
            "email is not the username without username_claim",
          );
          await assertAllowed(
            await tags(s, "who/sub", bearer(await corp.sign({ ...base, sub: "sub-carol" }))),
            "sub",
          );
          await assertAllowed(
            await tags(
              s,
              "who/sub",
              bearer(await corp.sign({ ...base, sub: "sub-carol", preferred_username: "carol" })),
            ),
            "sub whatever preferred_username says",
          );
        });

        await t.step("identity.claims is the verified payload", async () => {
          const claims = { sub: "x", aud: "wharf", tier: "silver", level: 3 };
          await assertAllowed(
            await tags(s, "claims/tier", bearer(await corp.sign(claims))),
            "tier silver",
          );
          await assertDenied(
            await tags(s, "claims/tier", bearer(await corp.sign({ ...claims, level: 2 }))),
            "level 2",
          );
        });

        await t.step("expired token → 401", async () => {
          await assertRejected(s, bearer(await corp.sign(OPS, { expiresIn: "-10m" })), "expired");
        });

        await t.step("not-yet-valid token → 401", async () => {
          const nbf = Math.floor(Date.now() / 1000) + 600;
          await assertRejected(s, bearer(await corp.sign({ ...OPS, nbf })), "nbf in 10 min");
        });

        await t.step("wrong audience → 401", async () => {
          await assertRejected(s, bearer(await corp.sign({ ...OPS, aud: "other" })), "aud other");
          const { aud: _, ...noAud } = OPS;
          await assertRejected(s, bearer(await corp.sign(noAud)), "no aud");
          await assertAllowed(
            await tags(s, "ops/app", bearer(await corp.sign({ ...OPS, aud: ["other", "wharf"] }))),
            "aud list containing wharf",
          );
        });

        await t.step("wrong issuer → 401", async () => {
          // signed with corp's real key, claiming to be disc (whose JWKS also has a "rsa-1")
          const asDisc = await corp.sign({ ...OPS, iss: disc.issuer });
          await assertRejected(s, bearer(asDisc), "corp key, disc iss");
          // Basic pins the provider, so corp checks the iss of its own correctly signed token
          await assertRejected(s, basic("corp", asDisc), "Basic corp, disc iss");
          const unknown = await corp.sign({ ...OPS, iss: "http://127.0.0.1:9/nobody" });
          await assertRejected(s, bearer(unknown), "unconfigured issuer");
          await assertRejected(s, basic("corp", unknown), "Basic corp, unconfigured issuer");
        });

        await t.step("required claim missing or with a wrong value → 401", async () => {
          const { tier: _, ...noTier } = OPS;
          await assertRejected(s, bearer(await corp.sign(noTier)), "no tier");
          await assertRejected(s, bearer(await corp.sign({ ...OPS, tier: "bronze" })), "bronze");
          await assertRejected(
            s,
            bearer(await corp.sign({ ...OPS, tier: ["bronze", "tin"] })),
            "array without an accepted value",
          );
          await assertAllowed(
            await tags(
              s,
              "ops/app",
              bearer(await corp.sign({ ...OPS, tier: ["bronze", "silver"] })),
            ),
            "an array claim containing an accepted value",
          );
        });

        await t.step("alg none → 401", async () => {
          await assertRejected(s, bearer(await corp.sign(OPS, { alg: "none" })), "alg none");
          await assertRejected(
            s,
            basic("corp", await corp.sign(OPS, { alg: "none" })),
            "Basic none",
          );
        });

        await t.step("HS256 keyed with the RSA public key PEM → 401", async () => {
          await assertRejected(s, bearer(await corp.sign(OPS, { alg: "HS256" })), "HS256");
        });

        await t.step("a tampered payload → 401", async () => {
          const [h, , sig] = (await corp.sign({ ...OPS, groups: ["dev"] })).split(".");
          const forged = btoa(JSON.stringify({ ...OPS, iss: corp.issuer, exp: 2e9 }))
            .replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
          await assertRejected(s, bearer(`${h}.${forged}.${sig}`), "payload swapped");
        });

        // Everything below depends on the cooldown having run out since priming and the outage.
        const wait = Math.max(primedAt, outageSeenAt) + COOLDOWN_MS + 1_500 - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));

        await t.step("unknown kid → exactly one JWKS refetch, then 401", async () => {
          const before = kid.jwksFetches();
          const jwt = await kid.sign({ sub: "k" }, { kid: "no-such-kid" });
          await assertUnauthorized(await tags(s, "any/app", bearer(jwt)), "unknown kid");
          assert.equal(kid.jwksFetches(), before + 1, "one refetch for the unknown kid");
          await assertRejected(s, bearer(jwt), "unknown kid again", "any/app");
          const other = await kid.sign({ sub: "k" }, { kid: "another-unknown-kid" });
          await assertRejected(s, bearer(other), "another unknown kid", "any/app");
          assert.equal(kid.jwksFetches(), before + 1, "no further refetch within the cooldown");
          // known keys still verify from the cache
          await assertAllowed(await tags(s, "any/app", bearer(await kid.sign({ sub: "k" }))), "ok");
          assert.equal(kid.jwksFetches(), before + 1);
        });

        await t.step("key rotation: the new kid is accepted after one refetch", async () => {
          const oldJwt = await rot.sign({ sub: "r" });
          const before = rot.jwksFetches();
          const newKid = await rot.rotateKey();
          const jwt = await rot.sign({ sub: "r" });
          assert.equal(
            JSON.parse(atob(jwt.split(".")[0].replace(/-/g, "+").replace(/_/g, "/"))).kid,
            newKid,
          );
          await assertAllowed(await tags(s, "any/app", bearer(jwt)), "rotated key");
          assert.equal(rot.jwksFetches(), before + 1);
          await assertAllowed(await tags(s, "any/app", bearer(oldJwt)), "old key still published");
          assert.equal(rot.jwksFetches(), before + 1);
        });

        await t.step("a recovered issuer is used again after the cooldown", async () => {
          await assertAllowed(
            await tags(s, "any/app", bearer(await down.sign({ sub: "d" }))),
            "JWKS back",
          );
          await assertAllowed(
            await tags(s, "any/app", bearer(await downd.sign({ sub: "d" }))),
            "discovery back",
          );
        });

        assert.doesNotMatch(s.output(), /panic|uncaught/i, "server log clean");
      });
    } finally {
      await Promise.all(Object.values(issuers).map((i) => i.close()));
    }
  },
});
