import assert from "node:assert/strict";
import { basic, FakeRegistry } from "../../tests/helpers/fake_registry.ts";
import { startUpstream, upstreamError } from "../../tests/helpers/upstream_client.ts";
import { UpstreamClient } from "./client.ts";
import { UpstreamError, type UpstreamErrorKind } from "./errors.ts";
import { TokenCache } from "./token_cache.ts";

const USER = { username: "alice", password: "hunter2-sécret" };
const BASIC = basic(USER.username, USER.password);

function blob(reg: FakeRegistry, name = "x"): string {
  return reg.addBlob(name, crypto.getRandomValues(new Uint8Array(100)));
}

/** upstreamError, and the message never holds the password */
function isKind(kind: UpstreamErrorKind, message?: RegExp) {
  return (e: unknown) => {
    upstreamError(kind, message)(e);
    assert.ok(!(e as Error).message.includes(USER.password), "never the password");
    return true;
  };
}

Deno.test("Basic: anonymous first, then the credentials, then up front", async () => {
  await using t = await startUpstream({ auth: { scheme: "basic", ...USER } }, USER);
  const d = blob(t.reg);
  assert.deepEqual(await t.client.headBlob("x", d), { size: 100 });
  assert.deepEqual(await t.client.headBlob("x", d), { size: 100 });
  assert.deepEqual(t.reg.requests.map((r) => r.authorization), [
    null,
    BASIC,
    BASIC,
  ]);
});

Deno.test("Basic: wrong or missing credentials are denied after one try", async () => {
  await using t = await startUpstream(
    { auth: { scheme: "basic", ...USER } },
    { username: "alice", password: "wrong" },
  );
  const d = blob(t.reg);
  await assert.rejects(
    t.client.headBlob("x", d),
    isKind("denied", /the configured credentials were refused|still 401/),
  );
  assert.equal(t.reg.requests.length, 2);

  await using anon = await startUpstream({ auth: { scheme: "basic", ...USER } });
  await assert.rejects(
    anon.client.headBlob("x", blob(anon.reg)),
    isKind("denied", /Basic credentials required, none configured/),
  );
  assert.equal(anon.reg.requests.length, 1);
});

Deno.test("Bearer: a realm on the upstream's host gets the credentials", async () => {
  await using t = await startUpstream(
    { auth: { scheme: "bearer", ...USER, anonymous: false } },
    USER,
  );
  const d = blob(t.reg, "org/x");
  assert.deepEqual(await t.client.headBlob("org/x", d), { size: 100 });
  const [tok] = t.reg.tokenRequests();
  assert.equal(tok.authorization, BASIC);
  assert.equal(tok.query.get("service"), "fake-registry");
  assert.equal(tok.query.get("scope"), "repository:org/x:pull");
  assert.equal(tok.host, `127.0.0.1:${t.reg.port}`);
  const [first, second] = t.reg.seen("HEAD", "/v2/");
  assert.equal(first.authorization, null, "anonymous first");
  assert.match(second.authorization!, /^Bearer /);
});

Deno.test("Bearer: a realm on another domain is asked anonymously", async () => {
  // 127.0.0.1 (an IP) and localhost (a single label) are different registrable "domains"
  await using t = await startUpstream({ auth: { scheme: "bearer", realmHost: "localhost" } }, USER);
  const d = blob(t.reg);
  assert.deepEqual(await t.client.headBlob("x", d), { size: 100 });
  const [tok] = t.reg.tokenRequests();
  assert.equal(tok.host, `localhost:${t.reg.port}`);
  assert.equal(tok.authorization, null, "the password never goes to a foreign realm");
  assert.ok(t.reg.requests.every((r) => !r.authorization?.startsWith("Basic")));

  // and the other way round: upstream on localhost, realm on 127.0.0.1
  await using u = await startUpstream(
    { host: "localhost", auth: { scheme: "bearer", realmHost: "127.0.0.1" } },
    USER,
  );
  await u.client.headBlob("x", blob(u.reg));
  assert.equal(u.reg.tokenRequests()[0].authorization, null);
});

Deno.test("Bearer: one token per scope for N requests until it nears expiry", async () => {
  let now = 1_000_000;
  const tokenCache = new TokenCache(() => now);
  await using t = await startUpstream(
    { auth: { scheme: "bearer", expiresIn: 300 } },
    {},
    { tokenCache },
  );
  const d = blob(t.reg);
  for (let i = 0; i < 10; i++) await t.client.headBlob("x", d);
  assert.equal(t.reg.tokenRequests().length, 1);
  assert.equal(t.reg.count("HEAD", "/blobs/"), 11, "one 401, then 10 with the token up front");

  await t.client.headBlob("y", blob(t.reg, "y"));
  assert.equal(t.reg.tokenRequests().length, 2, "another scope, another token");
  assert.equal(t.reg.count("HEAD", "/v2/y/"), 1, "the realm is known: no 401 first");

  now += 300_000 - 30_000 + 1; // past the refresh margin of a 300 s token
  await t.client.headBlob("x", d);
  assert.equal(t.reg.tokenRequests().length, 3);
  assert.equal(t.reg.count("HEAD", "/blobs/"), 13);
});

Deno.test("Bearer: access_token without expires_in lives 60 s", async () => {
  let now = 0;
  await using t = await startUpstream(
    { auth: { scheme: "bearer", tokenField: "access_token", expiresIn: null } },
    {},
    { tokenCache: new TokenCache(() => now) },
  );
  const d = blob(t.reg);
  await t.client.headBlob("x", d);
  now = 53_000;
  await t.client.headBlob("x", d);
  assert.equal(t.reg.tokenRequests().length, 1);
  now = 55_000;
  await t.client.headBlob("x", d);
  assert.equal(t.reg.tokenRequests().length, 2);
});

Deno.test("Bearer: concurrent first requests share one token request", async () => {
  await using t = await startUpstream({ auth: { scheme: "bearer" } });
  const d = blob(t.reg);
  await Promise.all(Array.from({ length: 8 }, () => t.client.headBlob("x", d)));
  assert.equal(t.reg.tokenRequests().length, 1);
});

Deno.test("Bearer: a refused token is replaced once; a second 401 is denied", async () => {
  await using t = await startUpstream({ auth: { scheme: "bearer" } });
  const d = blob(t.reg);
  await t.client.headBlob("x", d);
  t.reg.revokeTokens();
  assert.deepEqual(await t.client.headBlob("x", d), { size: 100 });
  assert.equal(t.reg.tokenRequests().length, 2);

  // tokens the registry never accepts: anonymous ones for a private registry
  t.reg.options.auth = { scheme: "bearer", anonymous: false };
  t.reg.revokeTokens();
  t.reg.resetLog();
  await assert.rejects(t.client.headBlob("x", d), isKind("denied", /still 401 after/));
  assert.equal(t.reg.count("HEAD", "/blobs/"), 2, "the cached token, then one fresh one");
  assert.equal(t.reg.tokenRequests().length, 1);
});

Deno.test("Bearer: a token service that answers wrongly is a clear error", async () => {
  await using t = await startUpstream({ auth: { scheme: "bearer", tokenBody: "html" } }, USER);
  const d = blob(t.reg);
  const cases: [Partial<Parameters<typeof setAuth>[1]>, UpstreamErrorKind, RegExp][] = [
    [
      { tokenBody: "html" },
      "invalid",
      /token request to .*\/token: answer is not JSON \(text\/html\)/,
    ],
    [{ tokenBody: "no-token" }, "invalid", /answer carries no token/],
    [{ username: "alice", password: "other" }, "denied", /token request to .*: 401/],
  ];
  function setAuth(reg: FakeRegistry, o: Record<string, unknown>) {
    reg.options.auth = { scheme: "bearer", ...o };
  }
  for (const [auth, kind, msg] of cases) {
    setAuth(t.reg, auth);
    await assert.rejects(t.client.headBlob("x", d), isKind(kind, msg));
  }
  setAuth(t.reg, {});
  t.reg.fault({ path: "/token", times: 1 }, { status: 503, headers: { "retry-after": "3" } });
  await assert.rejects(t.client.headBlob("x", d), (e: unknown) => {
    isKind("unavailable", /token request/)(e);
    assert.equal((e as UpstreamError).retryAfterSecs, 3);
    assert.equal((e as UpstreamError).down, true);
    return true;
  });
  assert.deepEqual(await t.client.headBlob("x", d), { size: 100 }, "then it recovers");
});

Deno.test("challenges: malformed, realm-less or unsupported ones are clear errors", async () => {
  await using t = await startUpstream({ auth: { scheme: "bearer" } }, USER);
  const d = blob(t.reg);
  const cases: [string, UpstreamErrorKind, RegExp][] = [
    ['Bearer realm="http://x/token', "invalid", /malformed WWW-Authenticate: unterminated/],
    ["Bearer realm=a=b", "invalid", /malformed WWW-Authenticate/],
    ['Bearer service="x"', "invalid", /Bearer challenge without an http\(s\) realm \(none\)/],
    ['Bearer realm="/token"', "invalid", /without an http\(s\) realm \(\/token\)/],
    ['Bearer realm="ftp://x/token"', "invalid", /without an http\(s\) realm/],
    [
      'Negotiate, Digest realm="x"',
      "denied",
      /no supported auth scheme offered \(negotiate, digest\)/,
    ],
  ];
  for (const [challenge, kind, msg] of cases) {
    t.reg.options.challengeOverride = challenge;
    await assert.rejects(t.client.headBlob("x", d), isKind(kind, msg), challenge);
  }
  t.reg.options.auth = null;
  t.reg.fault({ path: "/blobs/", times: 1 }, { status: 401 });
  await assert.rejects(
    t.client.headBlob("x", d),
    isKind("denied", /401 without a WWW-Authenticate/),
  );
});

Deno.test("Basic credentials go only to the upstream's origin, not to a CDN redirect", async () => {
  await using t = await startUpstream(
    { auth: { scheme: "basic", ...USER }, blobRedirect: "other-origin" },
    USER,
  );
  const d = blob(t.reg);
  const r = await t.client.getBlob("x", d);
  await r.body.cancel();
  const [cdn] = t.reg.seen("GET", "/cdn/");
  assert.equal(cdn.host, `localhost:${t.reg.port}`);
  assert.equal(cdn.authorization, null);
  assert.equal(t.reg.seen("GET", "/v2/x/blobs/")[1].authorization, BASIC);

  t.reg.options.blobRedirect = "same-origin";
  const s = await t.client.getBlob("x", d);
  await s.body.cancel();
  const [mirror] = t.reg.seen("GET", "/mirror/");
  assert.equal(mirror.authorization, BASIC, "same origin keeps it");
});

Deno.test("a Bearer token goes only to the upstream's origin, not to a CDN redirect", async () => {
  await using t = await startUpstream({ auth: { scheme: "bearer" }, blobRedirect: "other-origin" });
  const d = blob(t.reg);
  const r = await t.client.getBlob("x", d);
  assert.equal((await new Response(r.body).arrayBuffer()).byteLength, 100);
  assert.equal(t.reg.seen("GET", "/cdn/")[0].authorization, null);
  assert.match(t.reg.seen("GET", "/v2/x/blobs/")[1].authorization!, /^Bearer /);
});

Deno.test("a 401 from a CDN is denied without any credentials sent there", async () => {
  const reg = await FakeRegistry.start({ blobRedirect: "other-origin" });
  const client = new UpstreamClient(reg.upstreamConfig(USER));
  try {
    const d = blob(reg);
    reg.fault({ path: "/cdn/" }, {
      status: 401,
      headers: { "www-authenticate": 'Basic realm="cdn"' },
    });
    await assert.rejects(client.getBlob("x", d), isKind("denied", /GET blob x@sha256:\w+: 401/));
    assert.ok(reg.requests.every((r) => r.authorization === null));
  } finally {
    client.close();
    await reg.close();
  }
});
