// Issue 35 item 2 (docs/auth.md, "Providers: a name belongs to its sign-in method"): the same
// username from another sign-in method is another person. An OIDC token whose
// preferred_username is `ci` (a claim users pick), one whose sub is `ci`, and a client certificate
// with CN=ci do not pass docs/auth.md's worked-example rule for the Basic user `ci`, nor do
// registry tokens exchanged for them; `exempt_identities = ["basic:ci"]` exempts the Basic user
// only; the OIDC username claim defaults to `sub` and follows `username_claim`; identity lists
// that cannot be read one way stop startup.
import assert from "node:assert/strict";
import { assertError, serverTestOpts } from "../helpers/api.ts";
import { makeClientCert, makePki, opensslMissing, type Pki, tlsTable } from "../helpers/certs.ts";
import { startIssuer, type TestIssuer } from "../helpers/oidc_issuer.ts";
import { startServer, type TestServer, withServer } from "../helpers/server.ts";
import { hashPassword } from "../../lib/auth/mod.ts";

const PASSWORD = "ci-secret";
const toml = (v: unknown) => JSON.stringify(v);

interface World {
  s: TestServer;
  pki: Pki;
  /** the CA-trusting client without a certificate, and the one presenting CN=ci */
  plain: Deno.HttpClient;
  certCi: Deno.HttpClient;
  corp: TestIssuer;
  pref: TestIssuer;
  mail: TestIssuer;
}

function config(
  pki: Pki,
  hash: string,
  i: { corp: TestIssuer; pref: TestIssuer; mail: TestIssuer },
) {
  return `
${tlsTable(pki, "optional")}
[auth.identity.ci]
username = "ci"
password = ${toml(hash)}

# the default username claim: sub
[auth.oidc.corp]
issuer = ${toml(i.corp.issuer)}
jwks_uri = ${toml(i.corp.jwksUri)}

# a provider whose operator chose preferred_username: still not the Basic ci
[auth.oidc.pref]
issuer = ${toml(i.pref.issuer)}
jwks_uri = ${toml(i.pref.jwksUri)}
username_claim = "preferred_username"

[auth.oidc.mail]
issuer = ${toml(i.mail.issuer)}
jwks_uri = ${toml(i.mail.jwksUri)}
username_claim = "email"

[auth.token_service]
secret_key = "a-test-secret-that-is-long-enough-0123456789"

[global.access_policy]
default = "deny"
rules = [
  'request.action in ["healthz", "readyz", "get-token", "get-api-version"]',
  # docs/auth.md's worked example as it was (the name alone), and as it is now
  'has(identity.username) && identity.username == "ci" && request.namespace.startsWith("old/")',
  'identity.provider == "basic" && identity.username == "ci" && request.namespace.startsWith("apps/")',
  'request.namespace == "who/corp" && identity.provider == "oidc:corp" && identity.username == "u-1" && identity.issuer == ${
    toml(i.corp.issuer)
  }',
  'request.namespace == "who/mail" && identity.provider == "oidc:mail" && identity.username == "ci@example.com"',
  'request.namespace == "who/cert" && identity.provider == "mtls" && identity.username == "ci"',
  'request.namespace == "pub/app" && request.action == "get-manifest"',
]

[global.rate_limit]
pulls_per_hour = 1
exempt_identities = ["basic:ci"]
`;
}

async function withWorld(fn: (w: World) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-pki-" });
  const issuers: TestIssuer[] = [];
  const clients: Deno.HttpClient[] = [];
  try {
    const pki = await makePki(dir);
    const ci = await makeClientCert(dir, pki, "ci", "/CN=ci/O=Acme");
    const ca = await Deno.readTextFile(pki.caCert);
    const plain = Deno.createHttpClient({ caCerts: [ca] });
    const certCi = Deno.createHttpClient({
      caCerts: [ca],
      cert: await Deno.readTextFile(ci.cert),
      key: await Deno.readTextFile(ci.key),
    });
    clients.push(plain, certCi);
    const [corp, pref, mail] = [await startIssuer(), await startIssuer(), await startIssuer()];
    issuers.push(corp, pref, mail);
    const cfg = config(pki, await hashPassword(PASSWORD), { corp, pref, mail });
    await withServer({ config: cfg }, async (s) => {
      assert.ok(s.url.startsWith("https://"), s.url);
      await fn({ s, pki, plain, certCi, corp, pref, mail });
    });
  } finally {
    for (const c of clients) c.close();
    for (const i of issuers) await i.close();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

function call(
  w: World,
  path: string,
  headers: Record<string, string> = {},
  client: Deno.HttpClient = w.plain,
): Promise<Response> {
  const init: RequestInit & { client: Deno.HttpClient } = {
    headers,
    client,
    signal: AbortSignal.timeout(20_000),
  };
  return fetch(new URL(path, w.s.url), init);
}

const basic = (user: string, pass: string) => ({
  authorization: `Basic ${btoa(`${user}:${pass}`)}`,
});
const bearer = (jwt: string) => ({ authorization: `Bearer ${jwt}` });
const tags = (ns: string) => `/v2/${ns}/tags/list`;

/** Authorized: the policy let the request through to a repository that does not exist. */
async function assertAllowed(r: Response, what: string): Promise<void> {
  assert.equal(r.status, 404, `${what}: expected the route (404), got ${r.status}`);
  await assertError(r, 404, "NAME_UNKNOWN");
}

async function assertDenied(r: Response, what: string): Promise<void> {
  assert.equal(r.status, 403, `${what}: ${r.status} ${await r.clone().text()}`);
  await assertError(r, 403, "DENIED");
}

async function tokenFor(w: World, headers: Record<string, string>): Promise<string> {
  const r = await call(w, "/token", headers);
  assert.equal(r.status, 200, await r.clone().text());
  return (await r.json()).token;
}

const payloadOf = (jwt: string) =>
  JSON.parse(atob(jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/")));

const MISSING = opensslMissing("identity provider");

Deno.test({
  name: "a username from OIDC or a certificate is not the Basic user of that name",
  ignore: MISSING,
  ...serverTestOpts,
  fn: (t) =>
    withWorld(async (w) => {
      const basicCi = basic("ci", PASSWORD);
      await t.step("the Basic user ci passes the rule written for it", async () => {
        await assertAllowed(await call(w, tags("apps/web"), basicCi), "Basic ci");
      });

      await t.step("OIDC tokens naming ci do not", async () => {
        // preferred_username is what the user chose; with the default claim (sub) it is ignored
        const chosen = await w.corp.sign({ sub: "u-1", preferred_username: "ci" });
        await assertDenied(await call(w, tags("apps/web"), bearer(chosen)), "corp, preferred ci");
        // not even the name-only rule: a chosen name is no username by default
        await assertDenied(await call(w, tags("old/web"), bearer(chosen)), "name-only rule");
        // ...and the username is the sub, checked with the provider and issuer
        await assertAllowed(await call(w, tags("who/corp"), bearer(chosen)), "corp sub u-1");
        // a sub of "ci" is still corp's ci, not Basic ci
        const subCi = await w.corp.sign({ sub: "ci" });
        await assertDenied(await call(w, tags("apps/web"), bearer(subCi)), "corp sub ci");
        // a provider configured to read preferred_username: username ci, provider oidc:pref
        const pref = await w.pref.sign({ sub: "u-2", preferred_username: "ci" });
        await assertDenied(await call(w, tags("apps/web"), bearer(pref)), "pref ci");
        // OIDC via Basic, with the provider's name as the username
        await assertDenied(await call(w, tags("apps/web"), basic("pref", pref)), "Basic pref");
      });

      await t.step("a client certificate with CN=ci does not", async () => {
        await assertDenied(await call(w, tags("apps/web"), {}, w.certCi), "CN=ci");
        // it is mtls's ci
        await assertAllowed(await call(w, tags("who/cert"), {}, w.certCi), "mtls ci");
        // with the Basic header too, the identity is the Basic user's
        await assertAllowed(await call(w, tags("apps/web"), basicCi, w.certCi), "cert + Basic");
      });

      await t.step("registry tokens keep the provider of their credential", async () => {
        const pref = await w.pref.sign({ sub: "u-2", preferred_username: "ci" });
        const fromOidc = await tokenFor(w, bearer(pref));
        assert.equal(payloadOf(fromOidc).provider, "oidc:pref");
        await assertDenied(await call(w, tags("apps/web"), bearer(fromOidc)), "token of pref ci");
        const fromCert = await tokenFor(w, {});
        const certToken = await call(w, "/token", {}, w.certCi);
        const { token: mtlsToken } = await certToken.json();
        assert.equal(payloadOf(mtlsToken).provider, "mtls");
        assert.equal(payloadOf(fromCert).provider, "anonymous");
        await assertDenied(await call(w, tags("apps/web"), bearer(mtlsToken)), "token of CN=ci");
        const fromBasic = await tokenFor(w, basicCi);
        assert.equal(payloadOf(fromBasic).provider, "basic");
        await assertAllowed(await call(w, tags("apps/web"), bearer(fromBasic)), "token of ci");
      });

      await t.step("username_claim = email: the verified email only", async () => {
        const claims = { sub: "u-3", email: "ci@example.com" };
        const verified = await w.mail.sign({ ...claims, email_verified: true });
        await assertAllowed(await call(w, tags("who/mail"), bearer(verified)), "verified");
        // an unverified email names nobody: the credential is refused, not downgraded
        const unverified = await w.mail.sign({ ...claims, email_verified: false });
        const r = await call(w, tags("who/mail"), bearer(unverified));
        assert.equal(r.status, 401);
        const body = await r.json();
        assert.match(body.errors[0].detail, /"email" is not verified/);
      });

      await t.step('exempt_identities = ["basic:ci"]: the Basic user only', async () => {
        const pull = (h: Record<string, string>, client?: Deno.HttpClient) =>
          call(w, "/v2/pub/app/manifests/v1", h, client);
        // pulls_per_hour = 1: a pull of a manifest that is not there still counts
        for (let i = 0; i < 3; i++) {
          const r = await pull(basicCi);
          await assertError(r, 404, "MANIFEST_UNKNOWN");
        }
        const pref = bearer(await w.pref.sign({ sub: "u-2", preferred_username: "ci" }));
        await assertError(await pull(pref), 404, "MANIFEST_UNKNOWN");
        await assertError(await pull(pref), 429, "TOOMANYREQUESTS");
        await assertError(await pull({}, w.certCi), 404, "MANIFEST_UNKNOWN");
        await assertError(await pull({}, w.certCi), 429, "TOOMANYREQUESTS");
        // OIDC ci and mTLS ci do not share a bucket with each other or with Basic ci
        const corpCi = bearer(await w.corp.sign({ sub: "ci" }));
        await assertError(await pull(corpCi), 404, "MANIFEST_UNKNOWN");
      });
    }),
});

/** The first lines of a server that refused to start, and its exit code. */
async function refusal(config: string): Promise<{ code: number; output: string }> {
  try {
    const s = await startServer({ config });
    await s.stop();
    throw new Error("the server started");
  } catch (e) {
    const m = /^server exited \((\d+)\) before listening:\n([\s\S]*)$/.exec((e as Error).message);
    if (!m) throw e;
    return { code: Number(m[1]), output: m[2] };
  }
}

Deno.test({
  name: "identity lists: provider:name, a bare name only for a configured Basic user",
  ...serverTestOpts,
  async fn() {
    const hash = await hashPassword(PASSWORD);
    const auth = `
[auth.identity.ci]
username = "ci"
password = ${toml(hash)}
[auth.oidc.corp]
issuer = "https://id.example.com"
`;
    const cases: [string, RegExp][] = [
      [
        `["bot"]`,
        /exempt_identities\[0\]: "bot" names no \[auth\.identity\] username.*"basic:bot"/,
      ],
      [`["ci", "oidc:other:ci"]`, /exempt_identities\[1\].*"other" is not a configured/],
      [`["oidc:corp"]`, /exempt_identities\[0\].*"oidc:<provider>:<username>"/],
      [`["token:ci"]`, /exempt_identities\[0\].*unknown sign-in method "token"/],
      [`["basic:"]`, /exempt_identities\[0\].*no name after "basic:"/],
    ];
    for (const [list, why] of cases) {
      const { code, output } = await refusal(
        `${auth}[global.rate_limit]\nexempt_identities = ${list}\n`,
      );
      assert.equal(code, 2, output);
      assert.match(output, why);
      assert.doesNotMatch(output, /\n\s+at /, "one line, no stack trace");
    }
    // the same in a repository's table
    const repo = await refusal(
      `${auth}[repository."team".rate_limit]\nexempt_identities = ["mtls"]\n`,
    );
    assert.equal(repo.code, 2);
    assert.match(repo.output, /repository\."team"\.rate_limit\.exempt_identities\[0\]/);
    // an OIDC provider name cannot hold the separator
    const colon = await refusal(`[auth.oidc."a:b"]\nissuer = "https://id.example.com"\n`);
    assert.equal(colon.code, 2);
    assert.match(colon.output, /auth\.oidc\.a:b: provider name "a:b" must not contain ':'/);
    // valid forms start
    await withServer({
      config: `${auth}[global.rate_limit]\npulls_per_hour = 5\n` +
        `exempt_identities = ["ci", "basic:gone", "oidc:corp:u-1", "mtls:build-agent"]\n`,
    }, async (s) => {
      const r = await fetch(`${s.url}/v2/`, { signal: AbortSignal.timeout(10_000) });
      await r.body?.cancel();
      assert.equal(r.status, 200);
    });
  },
});

Deno.test({
  name: 'a bare "ci" in exempt_identities is the Basic user only',
  ...serverTestOpts,
  async fn() {
    const issuer = await startIssuer();
    try {
      const config = `
[auth.identity.ci]
username = "ci"
password = ${toml(await hashPassword(PASSWORD))}
[auth.oidc.pref]
issuer = ${toml(issuer.issuer)}
jwks_uri = ${toml(issuer.jwksUri)}
username_claim = "preferred_username"
[global.rate_limit]
pulls_per_hour = 1
exempt_identities = ["ci"]
`;
      await withServer({ config }, async (s) => {
        const pull = (headers: Record<string, string>) =>
          fetch(`${s.url}/v2/pub/app/manifests/v1`, {
            headers,
            signal: AbortSignal.timeout(10_000),
          });
        for (let i = 0; i < 3; i++) {
          await assertError(await pull(basic("ci", PASSWORD)), 404, "MANIFEST_UNKNOWN");
        }
        const oidcCi = bearer(await issuer.sign({ sub: "u-2", preferred_username: "ci" }));
        await assertError(await pull(oidcCi), 404, "MANIFEST_UNKNOWN");
        await assertError(await pull(oidcCi), 429, "TOOMANYREQUESTS");
      });
    } finally {
      await issuer.close();
    }
  },
});
