import assert from "node:assert/strict";
import { decodeJwt, decodeProtectedHeader, generateKeyPair, SignJWT } from "jose";
import { AuthenticationError, type Identity } from "./identity.ts";
import { TokenService } from "./token_service.ts";

const cfg = {
  secretKey: "a-test-secret-that-is-long-enough-0123456789",
  realm: "http://127.0.0.1:5000/token",
  service: "wharf.test",
  ttlSecs: 300,
};
const key = new TextEncoder().encode(cfg.secretKey);

const b64url = (s: string) => btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");

/** A token signed with the service's own key, with whatever header and claims a test needs. */
function forge(
  claims: Record<string, unknown>,
  header: { alg: string; typ?: string } = { alg: "HS256", typ: "svc+jwt" },
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({
    iss: cfg.service,
    aud: cfg.service,
    iat: now,
    exp: now + 60,
    jti: "j",
    idv: 2,
    provider: "basic",
    ...claims,
  })
    .setProtectedHeader(header)
    .sign(key);
}

async function rejects(svc: TokenService, jwt: string): Promise<void> {
  await assert.rejects(svc.verify(jwt), AuthenticationError);
}

const identities: Record<string, Identity> = {
  basic: { id: "alice-id", username: "alice", provider: "basic" },
  oidc: {
    id: "sub-123",
    username: "sub-123",
    provider: "oidc:corp",
    issuer: "https://id.example.com",
    claims: { sub: "sub-123", email: "alice@example.com", groups: ["dev", "ops"], n: 3 },
  },
  mtls: { id: "client-cn", username: "client-cn", provider: "mtls" },
  anonymous: { provider: "anonymous" },
};

for (const [kind, identity] of Object.entries(identities)) {
  Deno.test(`TokenService: ${kind} identity round-trips`, async () => {
    const svc = new TokenService(cfg);
    const before = Math.floor(Date.now() / 1000);
    const { token, expires_in } = await svc.issue(identity);
    assert.equal(expires_in, 300);
    assert.deepEqual(decodeProtectedHeader(token), { alg: "HS256", typ: "svc+jwt" });
    const payload = decodeJwt(token);
    assert.equal(payload.iss, "wharf.test");
    assert.equal(payload.aud, "wharf.test");
    assert.ok(typeof payload.iat === "number" && payload.iat >= before);
    assert.equal(payload.exp, payload.iat + 300);
    assert.match(String(payload.jti), /^[0-9a-f-]{36}$/);
    assert.equal(TokenService.isRegistryToken(token), true);
    assert.deepEqual(await svc.verify(token), identity);
  });
}

Deno.test("TokenService: anonymous token carries no identity but its provider; jti is unique", async () => {
  const svc = new TokenService(cfg);
  const a = decodeJwt((await svc.issue({ provider: "anonymous" })).token);
  const b = decodeJwt((await svc.issue({})).token);
  assert.deepEqual(Object.keys(a).sort(), ["aud", "exp", "iat", "idv", "iss", "jti", "provider"]);
  assert.equal(a.provider, "anonymous");
  assert.equal(b.provider, "anonymous", "an identity without a provider is anonymous");
  assert.notEqual(a.jti, b.jti);
});

Deno.test("TokenService: a token issued before identities carried their provider is refused", async () => {
  const svc = new TokenService(cfg);
  // The old layout: an OIDC provider's name as provider, preferred_username as username; a
  // provider named "basic" made its users look like Basic users.
  for (const old of [{ provider: "basic" }, { provider: "corp" }, {}]) {
    await assert.rejects(
      svc.verify(await forge({ idv: undefined, username: "ci", ...old })),
      /issued before identities carried their provider/,
    );
  }
  // and a current token naming a provider outside the grammar
  for (const provider of ["corp", "oidc:", "oidc:a:b", "token", "", 7]) {
    await rejects(svc, await forge({ username: "ci", provider }));
  }
});

Deno.test("TokenService: a certificate is never put in a token", async () => {
  const svc = new TokenService(cfg);
  const { token } = await svc.issue({
    id: "cn",
    username: "cn",
    provider: "mtls",
    certificate: { common_name: "cn", organizations: ["o"], organizational_units: [] },
  });
  assert.equal("certificate" in decodeJwt(token), false);
  assert.deepEqual(await svc.verify(token), { id: "cn", username: "cn", provider: "mtls" });
  // Even a validly signed token that names a certificate does not yield one.
  const forged = await forge({ id: "x", certificate: { common_name: "admin" } });
  assert.deepEqual(await svc.verify(forged), { id: "x", provider: "basic" });
});

Deno.test("TokenService: expired token is rejected", async () => {
  const svc = new TokenService(cfg);
  const now = Math.floor(Date.now() / 1000);
  await rejects(svc, await forge({ id: "a", iat: now - 120, exp: now - 60 }));
  // and one whose lifetime exceeds ttl_secs (signed under a longer ttl) is rejected too
  await rejects(svc, await forge({ id: "a", iat: now - 400, exp: now + 600 }));
  // a token with no exp at all
  const noExp = await new SignJWT({ id: "a", iss: cfg.service, aud: cfg.service, jti: "j" })
    .setProtectedHeader({ alg: "HS256", typ: "svc+jwt" }).setIssuedAt().sign(key);
  await rejects(svc, noExp);
});

Deno.test("TokenService: tampered payload or signature is rejected", async () => {
  const svc = new TokenService(cfg);
  const { token } = await svc.issue({ id: "alice-id", username: "alice", provider: "basic" });
  const [h, p, s] = token.split(".");
  const evil = b64url(JSON.stringify({ ...decodeJwt(token), username: "admin" }));
  await rejects(svc, `${h}.${evil}.${s}`);
  const flipped = s.slice(0, 5) + (s[5] === "A" ? "B" : "A") + s.slice(6);
  await rejects(svc, `${h}.${p}.${flipped}`);
  await rejects(svc, `${h}.${p}.`);
  await rejects(svc, `${h}.${p}`);
  await rejects(svc, "");
  await rejects(svc, "not a jwt");
});

Deno.test("TokenService: token signed with another secret is rejected", async () => {
  const other = new TokenService({ ...cfg, secretKey: "another-secret-another-secret-0123456789" });
  const { token } = await other.issue({ id: "alice-id" });
  await rejects(new TokenService(cfg), token);
});

Deno.test("TokenService: alg none is rejected", async () => {
  const svc = new TokenService(cfg);
  const now = Math.floor(Date.now() / 1000);
  const header = b64url(JSON.stringify({ alg: "none", typ: "svc+jwt" }));
  const body = b64url(
    JSON.stringify({
      iss: cfg.service,
      aud: cfg.service,
      iat: now,
      exp: now + 60,
      jti: "j",
      id: "x",
    }),
  );
  const token = `${header}.${body}.`;
  assert.equal(TokenService.isRegistryToken(token), true, "the header alone claims svc+jwt");
  await rejects(svc, token);
});

Deno.test("TokenService: other HMAC algorithms with the right key are rejected", async () => {
  const svc = new TokenService(cfg);
  await rejects(svc, await forge({ id: "x" }, { alg: "HS512", typ: "svc+jwt" }));
});

Deno.test("TokenService: RS256-signed token with typ svc+jwt is rejected", async () => {
  const svc = new TokenService(cfg);
  const { privateKey } = await generateKeyPair("RS256");
  const now = Math.floor(Date.now() / 1000);
  const token = await new SignJWT({
    iss: cfg.service,
    aud: cfg.service,
    iat: now,
    exp: now + 60,
    jti: "j",
    id: "x",
  }).setProtectedHeader({ alg: "RS256", typ: "svc+jwt" }).sign(privateKey);
  assert.equal(TokenService.isRegistryToken(token), true);
  await rejects(svc, token);
});

Deno.test("TokenService: wrong typ, issuer or audience is rejected", async () => {
  const svc = new TokenService(cfg);
  await rejects(svc, await forge({ id: "x" }, { alg: "HS256", typ: "JWT" }));
  await rejects(svc, await forge({ id: "x" }, { alg: "HS256" }));
  await rejects(svc, await forge({ id: "x", iss: "someone.else" }));
  await rejects(svc, await forge({ id: "x", aud: "someone.else" }));
  await rejects(svc, await forge({ id: "x", jti: undefined }));
  // A token of another registry sharing the secret but not the service name.
  const other = new TokenService({ ...cfg, service: "other.registry" });
  await rejects(svc, (await other.issue({ id: "x" })).token);
});

Deno.test("TokenService: identity fields of the wrong type are rejected", async () => {
  const svc = new TokenService(cfg);
  await rejects(svc, await forge({ id: 42 }));
  await rejects(svc, await forge({ username: ["a"] }));
  await rejects(svc, await forge({ claims: "x" }));
  await rejects(svc, await forge({ claims: [1] }));
});

Deno.test("TokenService.isRegistryToken: decides by the declared typ only, never throws", async () => {
  const svc = new TokenService(cfg);
  assert.equal(TokenService.isRegistryToken((await svc.issue({})).token), true);
  assert.equal(TokenService.isRegistryToken(await forge({}, { alg: "HS256", typ: "JWT" })), false);
  assert.equal(TokenService.isRegistryToken(await forge({}, { alg: "HS256" })), false);
  // other registry-token spellings that jose's typ check also accepts
  const h = b64url(JSON.stringify({ alg: "HS256", typ: "application/SVC+JWT" }));
  assert.equal(TokenService.isRegistryToken(`${h}.e30.sig`), true);
  for (
    const bad of [
      "",
      "a.b.c",
      "...",
      "not-a-jwt",
      `${b64url("{")}.e30.x`,
      `${b64url("[]")}.e30.x`,
      `${b64url(JSON.stringify({ alg: "HS256", typ: 7 }))}.e30.x`,
      `${b64url(JSON.stringify({ alg: "HS256", typ: "svc+jwt" }))}.e30`,
      null as unknown as string,
      {} as unknown as string,
    ]
  ) {
    assert.equal(TokenService.isRegistryToken(bad), false, String(bad));
  }
});

Deno.test("TokenService: refuses an empty secret or a non-positive ttl", () => {
  assert.throws(() => new TokenService({ ...cfg, secretKey: "" }));
  assert.throws(() => new TokenService({ ...cfg, ttlSecs: 0 }));
});
