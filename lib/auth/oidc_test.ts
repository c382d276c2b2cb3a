import assert from "node:assert/strict";
import type { OidcProviderConfig } from "../config/schema.ts";
import { AuthenticationError } from "./identity.ts";
import { OidcVerifier, type OidcVerifierOptions } from "./oidc.ts";
import { startIssuer, type TestIssuer } from "../../tests/helpers/oidc_issuer.ts";

function provider(
  name: string,
  issuer: string,
  extra: Partial<OidcProviderConfig> = {},
): OidcProviderConfig {
  return { name, issuer, jwksUri: null, audience: [], requiredClaims: {}, ...extra };
}

function verifierFor(cfgs: OidcProviderConfig[], opts?: OidcVerifierOptions): OidcVerifier {
  return new OidcVerifier(new Map(cfgs.map((c) => [c.name, c])), opts);
}

async function withIssuer(fn: (iss: TestIssuer) => Promise<void>): Promise<void> {
  const iss = await startIssuer();
  try {
    await fn(iss);
  } finally {
    await iss.close();
  }
}

/** asserts an AuthenticationError whose message names the reason and leaks no token bytes */
async function rejects(p: Promise<unknown>, reason: RegExp, token?: string): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof AuthenticationError, `expected AuthenticationError, got ${err}`);
    assert.match(err.message, reason);
    if (token) {
      for (const part of token.split(".").filter((s) => s.length > 8)) {
        assert.ok(!err.message.includes(part), "error message leaks token contents");
      }
    }
    return true;
  });
}

const b64url = (o: unknown) =>
  btoa(JSON.stringify(o)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");

Deno.test("oidc: provider lookup helpers", () => {
  const empty = verifierFor([]);
  assert.equal(empty.hasProviders(), false);
  assert.equal(empty.isProvider("corp"), false);
  const v = verifierFor([provider("corp", "https://idp.example")]);
  assert.equal(v.hasProviders(), true);
  assert.equal(v.isProvider("corp"), true);
  assert.equal(v.isProvider("other"), false);
});

Deno.test("oidc: valid token via Bearer routing (iss) and via provider name", async () => {
  await withIssuer(async (iss) => {
    const v = verifierFor([
      // same keys, different issuer: only the iss check tells them apart
      provider("other", "https://elsewhere.example", { jwksUri: iss.jwksUri }),
      // trailing slash in config must not break routing or the iss check
      provider("corp", `${iss.issuer}/`, { audience: ["wharf"] }),
    ]);
    const token = await iss.sign({
      sub: "u-1",
      aud: "wharf",
      preferred_username: "alice",
      email: "a@example.com",
      groups: ["dev"],
    });
    const id = await v.verify(token);
    assert.equal(id.id, "u-1");
    // the username is the sub by default, never the user-chosen preferred_username
    assert.equal(id.username, "u-1");
    assert.equal(id.provider, "oidc:corp");
    assert.equal(id.issuer, iss.issuer);
    assert.deepEqual(id.claims?.groups, ["dev"]);
    assert.equal(id.claims?.iss, iss.issuer);
    // discovery was used (no jwksUri configured) and cached; JWKS fetched once
    assert.equal(iss.discoveryFetches(), 1);
    assert.equal(iss.jwksFetches(), 1, "only the routed provider fetched keys");

    const viaBasic = await v.verify(token, "corp");
    assert.equal(viaBasic.id, "u-1");
    assert.equal(viaBasic.provider, "oidc:corp");
    assert.equal(iss.discoveryFetches(), 1);
    assert.equal(iss.jwksFetches(), 1);

    // the named provider is the only one tried, whatever the token says
    await rejects(v.verify(token, "other"), /claim "iss"/);
    await rejects(v.verify(token, "nope"), /unknown provider/);

    // ES256 key; an email is not the username unless the config says so
    const es = await iss.sign({ sub: "u-2", aud: "wharf", email: "b@example.com" }, {
      alg: "ES256",
    });
    assert.equal((await v.verify(es)).username, "u-2");
    const bare = await iss.sign({ sub: "u-3", aud: ["x", "wharf"] });
    assert.equal((await v.verify(bare)).username, "u-3");
  });
});

Deno.test("oidc: username_claim picks the username; email only when verified", async () => {
  await withIssuer(async (iss) => {
    const v = verifierFor([
      provider("mail", iss.issuer, { usernameClaim: "email" }),
      provider("pref", iss.issuer, { usernameClaim: "preferred_username" }),
      provider("sub", iss.issuer),
    ]);
    const claims = { sub: "u-9", email: "c@example.com", preferred_username: "ci" };
    const verified = await iss.sign({ ...claims, email_verified: true });
    assert.equal((await v.verify(verified, "mail")).username, "c@example.com");
    assert.equal((await v.verify(verified, "mail")).id, "u-9");
    assert.equal((await v.verify(verified, "pref")).username, "ci");
    assert.equal((await v.verify(verified, "sub")).username, "u-9");
    // an unverified (or "true" as a string) email names nobody: 401, not a fallback
    for (const email_verified of [undefined, false, "true"]) {
      await rejects(
        v.verify(await iss.sign({ ...claims, email_verified }), "mail"),
        /"email" is not verified/,
      );
    }
    // a configured claim the token lacks, or that is not a string
    await rejects(v.verify(await iss.sign({ sub: "u-9" }), "pref"), /no "preferred_username"/);
    await rejects(
      v.verify(await iss.sign({ sub: "u-9", preferred_username: 7 }), "pref"),
      /no "preferred_username"/,
    );
  });
});

Deno.test("oidc: configured jwks_uri skips discovery", async () => {
  await withIssuer(async (iss) => {
    const v = verifierFor([provider("corp", iss.issuer, { jwksUri: iss.jwksUri })]);
    const id = await v.verify(await iss.sign({ sub: "u-1" }));
    assert.equal(id.id, "u-1");
    assert.equal(iss.discoveryFetches(), 0);
    assert.equal(iss.jwksFetches(), 1);
  });
});

Deno.test("oidc: expired, wrong audience, missing exp/sub, wrong issuer are rejected", async () => {
  await withIssuer(async (iss) => {
    const v = verifierFor([provider("corp", iss.issuer, { audience: ["wharf"] })]);
    const expired = await iss.sign({ sub: "u", aud: "wharf" }, { expiresIn: "-2m" });
    await rejects(v.verify(expired), /expired/, expired);
    // within the 30 s clock tolerance is still accepted
    const justExpired = await iss.sign({ sub: "u", aud: "wharf" }, { expiresIn: "-5s" });
    assert.equal((await v.verify(justExpired)).id, "u");

    const wrongAud = await iss.sign({ sub: "u", aud: "someone-else" });
    await rejects(v.verify(wrongAud), /claim "aud"/, wrongAud);
    const noAud = await iss.sign({ sub: "u" });
    await rejects(v.verify(noAud), /claim "aud"/, noAud);

    const noExp = await iss.sign({ sub: "u", aud: "wharf", exp: undefined });
    await rejects(v.verify(noExp), /claim "exp"/, noExp);
    const noSub = await iss.sign({ aud: "wharf" });
    await rejects(v.verify(noSub), /claim "sub"/, noSub);

    // signed by the right key but claiming another issuer, forced onto this provider
    const otherIss = await iss.sign({ sub: "u", aud: "wharf", iss: "https://evil.example" });
    await rejects(v.verify(otherIss, "corp"), /claim "iss"/, otherIss);
  });
});

Deno.test("oidc: required claims (string, list, array-valued claim)", async () => {
  await withIssuer(async (iss) => {
    const v = verifierFor([
      provider("corp", iss.issuer, {
        requiredClaims: {
          groups: "registry-users",
          env: ["prod", "staging"],
          email_verified: "true",
        },
      }),
    ]);
    const ok = await iss.sign({
      sub: "u",
      groups: ["dev", "registry-users"],
      env: "staging",
      email_verified: true,
    });
    assert.equal((await v.verify(ok)).id, "u");

    const missing = await iss.sign({ sub: "u", env: "prod", email_verified: true });
    await rejects(v.verify(missing), /required claim "groups"/, missing);
    const notInArray = await iss.sign({
      sub: "u",
      groups: ["dev"],
      env: "prod",
      email_verified: true,
    });
    await rejects(v.verify(notInArray), /required claim "groups"/, notInArray);
    const wrongValue = await iss.sign({
      sub: "u",
      groups: "registry-users",
      env: "dev",
      email_verified: true,
    });
    await rejects(v.verify(wrongValue), /required claim "env"/, wrongValue);
    const objectClaim = await iss.sign({
      sub: "u",
      groups: { "registry-users": true },
      env: "prod",
      email_verified: true,
    });
    await rejects(v.verify(objectClaim), /required claim "groups"/, objectClaim);
  });
});

Deno.test("oidc: unknown kid refetches once per cooldown; rotation picked up", async () => {
  await withIssuer(async (iss) => {
    const cooldown = 300;
    const v = verifierFor([provider("corp", iss.issuer)], { refetchCooldownMs: cooldown });
    assert.equal((await v.verify(await iss.sign({ sub: "u" }))).id, "u");
    assert.equal(iss.jwksFetches(), 1);
    await new Promise((r) => setTimeout(r, cooldown + 50));

    const unknown1 = await iss.sign({ sub: "u" }, { kid: "ghost-1" });
    await rejects(v.verify(unknown1), /no matching key/, unknown1);
    assert.equal(iss.jwksFetches(), 2, "exactly one refetch for an unknown kid");
    const unknown2 = await iss.sign({ sub: "u" }, { kid: "ghost-2" });
    await rejects(v.verify(unknown2), /no matching key/, unknown2);
    await rejects(v.verify(unknown1), /no matching key/, unknown1);
    assert.equal(iss.jwksFetches(), 2, "no refetch within the cooldown");

    // concurrent unknown kids after the cooldown still cause a single fetch
    await new Promise((r) => setTimeout(r, cooldown + 50));
    const kid = await iss.rotateKey();
    const rotated = await iss.sign({ sub: "rotated" });
    const results = await Promise.allSettled(
      Array.from({ length: 5 }, () => v.verify(rotated)),
    );
    assert.equal(iss.jwksFetches(), 3);
    for (const r of results) {
      assert.equal(r.status, "fulfilled");
      assert.equal((r as PromiseFulfilledResult<{ id?: string }>).value.id, "rotated");
    }
    assert.match(kid, /^rsa-rotated-/);
    // the old, still-published key keeps working without another fetch
    assert.equal((await v.verify(await iss.sign({ sub: "es" }, { alg: "ES256" }))).id, "es");
    assert.equal(iss.jwksFetches(), 3);
  });
});

Deno.test("oidc: rotation inside the cooldown is not seen until it elapses", async () => {
  await withIssuer(async (iss) => {
    // Generous: key generation in rotateKey must finish inside the cooldown even on a loaded CI
    // machine (400 ms flaked there).
    const cooldown = 3000;
    const v = verifierFor([provider("corp", iss.issuer)], { refetchCooldownMs: cooldown });
    await v.verify(await iss.sign({ sub: "u" }));
    await iss.rotateKey();
    const rotated = await iss.sign({ sub: "u" });
    await rejects(v.verify(rotated), /no matching key/);
    assert.equal(iss.jwksFetches(), 1);
    await new Promise((r) => setTimeout(r, cooldown + 50));
    assert.equal((await v.verify(rotated)).id, "u");
    assert.equal(iss.jwksFetches(), 2);
  });
});

Deno.test("oidc: alg none and HS256-with-public-key tokens are rejected", async () => {
  await withIssuer(async (iss) => {
    const v = verifierFor([provider("corp", iss.issuer)]);
    const none = await iss.sign({ sub: "admin" }, { alg: "none" });
    assert.ok(none.endsWith("."));
    await rejects(v.verify(none), /algorithm not allowed|invalid token/, none);
    await rejects(v.verify(none, "corp"), /algorithm not allowed|invalid token/, none);
    const hs = await iss.sign({ sub: "admin" }, { alg: "HS256" });
    await rejects(v.verify(hs), /algorithm not allowed/, hs);
    // an RS256 header over a tampered payload keeps the original signature: must fail
    const good = await iss.sign({ sub: "user" });
    const [h, , s] = good.split(".");
    const forged = `${h}.${b64url({ iss: iss.issuer, sub: "admin", exp: 9999999999 })}.${s}`;
    await rejects(v.verify(forged), /invalid signature/, forged);
  });
});

Deno.test("oidc: unconfigured issuer and malformed tokens", async () => {
  await withIssuer(async (iss) => {
    const v = verifierFor([provider("corp", "https://idp.example")]);
    const token = await iss.sign({ sub: "u" });
    await rejects(v.verify(token), /no provider for issuer/, token);
    assert.equal(iss.discoveryFetches() + iss.jwksFetches(), 0, "nothing fetched for strangers");
    await rejects(v.verify("not-a-jwt"), /malformed/);
    await rejects(v.verify(`${b64url({ alg: "RS256" })}.${b64url({ sub: "x" })}.sig`), /issuer/);
    await rejects(v.verify("a".repeat(70_000)), /too large/);
  });
});

Deno.test("oidc: discovery whose issuer differs from the configured one is not trusted", async () => {
  await withIssuer(async (iss) => {
    // same server reached via "localhost": the document announces 127.0.0.1
    const alias = iss.issuer.replace("127.0.0.1", "localhost");
    const v = verifierFor([provider("corp", alias)]);
    const token = await iss.sign({ sub: "u", iss: alias });
    await rejects(v.verify(token), /discovery issuer mismatch/, token);
    assert.equal(iss.jwksFetches(), 0);
  });
});

Deno.test("oidc: unreachable discovery fails fast and is rate limited", async () => {
  // a port that was just free: connection refused
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const deadIssuer = `http://127.0.0.1:${(l.addr as Deno.NetAddr).port}`;
  l.close();
  await withIssuer(async (iss) => {
    const v = verifierFor([provider("dead", deadIssuer)], { refetchCooldownMs: 5000 });
    const token = await iss.sign({ sub: "u", iss: deadIssuer });
    let t0 = performance.now();
    await rejects(v.verify(token), /issuer unavailable/, token);
    assert.ok(performance.now() - t0 < 2000, "refused connection is reported quickly");
    t0 = performance.now();
    await rejects(v.verify(token, "dead"), /issuer unavailable/, token);
    assert.ok(performance.now() - t0 < 250, "retry within the cooldown does not refetch");
  });
});

Deno.test("oidc: a hanging issuer times out into AuthenticationError", async () => {
  // accepts TCP connections and never answers
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const conns: Deno.Conn[] = [];
  const accepting = (async () => {
    try {
      for await (const c of listener) conns.push(c);
    } catch { /* closed */ }
  })();
  const hung = `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`;
  try {
    await withIssuer(async (iss) => {
      const v = verifierFor([
        provider("hung", hung),
        provider("hungjwks", iss.issuer, { jwksUri: `${hung}/jwks` }),
      ], { timeoutMs: 300 });
      const t0 = performance.now();
      await rejects(v.verify(await iss.sign({ sub: "u", iss: hung })), /issuer unavailable/);
      await rejects(v.verify(await iss.sign({ sub: "u" })), /issuer unavailable/);
      const elapsed = performance.now() - t0;
      assert.ok(elapsed >= 550 && elapsed < 3000, `both timed out at ~300 ms (${elapsed} ms)`);
    });
  } finally {
    listener.close();
    await accepting;
    for (const c of conns) c.close();
  }
});

Deno.test("oidc: issuer outage is a rate-limited AuthenticationError, then recovers", async () => {
  await withIssuer(async (iss) => {
    const cooldown = 250;
    const v = verifierFor([provider("corp", iss.issuer)], { refetchCooldownMs: cooldown });
    const token = await iss.sign({ sub: "u" });
    iss.setAvailable(false);
    await rejects(v.verify(token), /discovery failed/, token);
    await rejects(v.verify(token), /issuer unavailable/, token);
    assert.equal(iss.discoveryFetches(), 1, "failed discovery not retried within the cooldown");

    await new Promise((r) => setTimeout(r, cooldown + 50));
    iss.setAvailable(true);
    assert.equal((await v.verify(token)).id, "u");
    assert.equal(iss.discoveryFetches(), 2);
    assert.equal(iss.jwksFetches(), 1);

    // JWKS outage after keys are cached: known kids keep verifying, unknown kids get a 401
    // and the failed refetch is not repeated within the cooldown
    await new Promise((r) => setTimeout(r, cooldown + 50));
    iss.setAvailable(false);
    const ghost = await iss.sign({ sub: "u" }, { kid: "ghost" });
    await rejects(v.verify(ghost), /issuer unavailable/, ghost);
    assert.equal(iss.jwksFetches(), 2);
    assert.equal((await v.verify(token)).id, "u");
    await rejects(v.verify(ghost), /no matching key|issuer unavailable/, ghost);
    assert.equal(iss.jwksFetches(), 2);

    // a JWKS URL answering 404 is the same: 401, not 500
    const bad = verifierFor([provider("corp", iss.issuer, { jwksUri: `${iss.issuer}/missing` })]);
    await rejects(bad.verify(token), /issuer unavailable/, token);
  });
});

Deno.test("oidc: repeated verifies are served from the cached JWKS", async () => {
  await withIssuer(async (iss) => {
    const v = verifierFor([provider("corp", iss.issuer, { audience: ["wharf"] })]);
    // Latency is measured by bench/oidc_bench.ts; this checks the cache holds.
    for (const alg of ["RS256", "ES256"]) {
      const token = await iss.sign({ sub: "u", aud: "wharf" }, { alg });
      for (let i = 0; i < 200; i++) assert.equal((await v.verify(token)).id, "u");
    }
    assert.equal(iss.jwksFetches(), 1);
  });
});
