// Issue 22 §4 for the identity side: an OIDC issuer's discovery redirects and the jwks_uri its
// document names are vetted before they are fetched (the client sees "issuer unavailable"), and
// the authorization webhook never follows a redirect at all.
import assert from "node:assert/strict";
import { defaultConfig } from "../config/schema.ts";
import { startIssuer } from "../../tests/helpers/oidc_issuer.ts";
import { METADATA_TARGETS, startRedirector, startSink } from "../../tests/helpers/outbound.ts";
import { AuthorizationWebhooks } from "./authz_webhook.ts";
import { AuthenticationError } from "./identity.ts";
import { OidcVerifier } from "./oidc.ts";

/** An issuer whose discovery document is one redirect away and names `jwks()` as jwks_uri. */
function redirectingIssuer(jwks: () => string) {
  let self = "";
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (req) => {
    const path = new URL(req.url).pathname;
    if (path === "/.well-known/openid-configuration") {
      return new Response(null, { status: 302, headers: { location: "/doc" } });
    }
    if (path === "/doc") return Response.json({ issuer: self, jwks_uri: jwks() });
    return new Response(null, { status: 404 });
  });
  self = `http://127.0.0.1:${server.addr.port}`;
  return { url: self, [Symbol.asyncDispose]: () => server.shutdown() };
}

function verifier(issuer: string, outboundAllow?: string[]) {
  const cfg = { name: "corp", issuer, jwksUri: null, audience: [], requiredClaims: {} };
  return new OidcVerifier(new Map([["corp", outboundAllow ? { ...cfg, outboundAllow } : cfg]]), {
    refetchCooldownMs: 0,
    timeoutMs: 2000,
  });
}

const unavailable = (e: unknown) => {
  assert.ok(e instanceof AuthenticationError, String(e));
  assert.match(e.message, /issuer unavailable/);
  return true;
};

Deno.test("oidc: a discovery redirect to a metadata address is refused", async () => {
  const iss = await startIssuer();
  try {
    await using r = startRedirector(METADATA_TARGETS[0], 302);
    for (const target of METADATA_TARGETS) {
      r.to = target;
      const token = await iss.sign({ sub: "u", iss: r.url });
      const started = performance.now();
      await assert.rejects(verifier(r.url).verify(token), unavailable, target);
      assert.ok(performance.now() - started < 1500, "refused before any connect attempt");
    }
  } finally {
    await iss.close();
  }
});

Deno.test("oidc: a followed discovery redirect works; the jwks_uri it names is vetted", async () => {
  const iss = await startIssuer();
  await using sink = startSink();
  try {
    let jwks = iss.jwksUri;
    await using idp = redirectingIssuer(() => jwks);
    const token = await iss.sign({ sub: "u-1", iss: idp.url });
    assert.equal((await verifier(idp.url).verify(token)).id, "u-1", "loopback to loopback");
    for (const bad of ["http://169.254.169.254/jwks", "http://[fd00:ec2::254]/jwks"]) {
      jwks = bad;
      await assert.rejects(verifier(idp.url).verify(token), unavailable, bad);
    }
    jwks = `${sink.unspecifiedUrl}/jwks`;
    await assert.rejects(verifier(idp.url).verify(token), unavailable);
    assert.equal(sink.seen.length, 0, "the refused jwks_uri was never fetched");
    // allowed on purpose: fetched (and its `{}` is no key set)
    await assert.rejects(verifier(idp.url, ["0.0.0.0"]).verify(token), AuthenticationError);
    assert.equal(sink.seen.length, 1);
  } finally {
    await iss.close();
  }
});

Deno.test("authorization webhook: a redirect is an error (deny), never followed", async () => {
  await using sink = startSink();
  await using r = startRedirector(`${sink.unspecifiedUrl}/authz`);
  const cfg = defaultConfig();
  cfg.auth.webhooks.set("w", {
    name: "w",
    url: `${r.url}/authz`,
    timeoutMs: 2000,
    forwardHeaders: [],
    cacheTtlSecs: 0,
  });
  cfg.global.authorizationWebhook = "w";
  const seen: string[] = [];
  const hooks = new AuthorizationWebhooks(cfg, (_w, decision) => seen.push(decision));
  const ask = () =>
    hooks.allows({ action: "pull", method: "GET", namespace: "a/b" }, {}, "1", new Headers());
  for (const target of [...METADATA_TARGETS, `${sink.unspecifiedUrl}/authz`]) {
    r.to = target;
    assert.equal(await ask(), false, target);
  }
  r.to = `http://localhost:${sink.port}/authz`;
  assert.equal(await ask(), false, "even to an ordinary address");
  assert.deepEqual(new Set(seen), new Set(["error"]));
  assert.equal(sink.seen.length, 0);
  assert.equal(r.seen.length, METADATA_TARGETS.length + 2);
});
