// docs/auth.md §Token service and §Challenges against a real Wharf process: the Bearer challenge
// and its scopes, GET /token for anonymous and Basic callers (the token carries the identity and
// nothing more), the refusals (token for a token, POST, expiry, foreign or tampered signatures),
// malformed Authorization headers (always 401, never 5xx), and that no secret reaches the log.
import assert from "node:assert/strict";
import { assertError, req, serverTestOpts } from "../helpers/api.ts";
import { randomBytes, sha256 } from "../helpers/bytes.ts";
import { distinctManifest, OCI_MANIFEST } from "../helpers/oci_content.ts";
import { sendRaw } from "../helpers/raw_http.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { identityTables } from "../helpers/identities.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

const PASSWORDS = { root: "root-tok-pw-71c0", alice: "alice-tok-pw-8e42", bob: "bob-tok-pw-2f9d" };
const SECRET = "wharf-token-test-secret-5c1b9e0d7a3f4e2b";
const SERVICE = "wharf.test";
const TTL = 300;

const basic = (user: string, pw: string) => `Basic ${btoa(`${user}:${pw}`)}`;
const ROOT = { authorization: basic("root", PASSWORDS.root) };
const ALICE = { authorization: basic("alice", PASSWORDS.alice) };
const BOB = { authorization: basic("bob", PASSWORDS.bob) };
const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

const PULL = '["get-manifest", "get-blob", "list-tags", "get-referrers"]';

/** Anonymous pulls pub/*, alice does anything in team/*, bob pulls anything, root anything. */
const POLICY = `
[global.access_policy]
default = "deny"
rules = [
  'request.action in ["healthz", "readyz", "get-api-version", "get-token"]',
  '!has(identity.username) && request.action in ${PULL} && request.namespace.startsWith("pub/")',
  'has(identity.username) && identity.username == "alice" && request.namespace.startsWith("team/")',
  'has(identity.username) && identity.username == "bob" && request.action in ${PULL}',
  'has(identity.username) && identity.username == "root"',
]
`;

function tokenService(realm: string, ttl: number, service: string | null = SERVICE): string {
  return `
[auth.token_service]
secret_key = "${SECRET}"
realm = "${realm}"
${service === null ? "" : `service = "${service}"`}
ttl_secs = ${ttl}
`;
}

/** A port that was free a moment ago, so the realm can name the server itself. */
function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

// ---------------------------------------------------------------------------------------------
// JWT plumbing, written out so the tests do not share code with the server's token service

function b64url(b: Uint8Array): string {
  return btoa(String.fromCharCode(...b)).replace(/\+/g, "-").replace(/\//g, "_").replace(
    /=+$/,
    "",
  );
}

function unb64url(s: string): Uint8Array {
  const b = atob(s.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - s.length % 4) % 4));
  return Uint8Array.from(b, (c) => c.charCodeAt(0));
}

const part = (v: unknown) => b64url(enc.encode(JSON.stringify(v)));

function decodeJwt(
  jwt: string,
): { header: Record<string, unknown>; payload: Record<string, unknown> } {
  const [h, p, sig] = jwt.split(".");
  assert.ok(h && p && sig, `not a signed JWT: ${jwt}`);
  return {
    header: JSON.parse(dec.decode(unb64url(h))),
    payload: JSON.parse(dec.decode(unb64url(p))),
  };
}

async function hs256(header: unknown, payload: unknown, key: Uint8Array): Promise<string> {
  const input = `${part(header)}.${part(payload)}`;
  const k = await crypto.subtle.importKey(
    "raw",
    key as BufferSource,
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const sig = new Uint8Array(await crypto.subtle.sign("HMAC", k, enc.encode(input)));
  return `${input}.${b64url(sig)}`;
}

/** Claims shaped like the server's own tokens for `username`, valid for `ttl` from now. */
function claims(username: string, ttl = TTL): Record<string, unknown> {
  const iat = Math.floor(Date.now() / 1000);
  return {
    id: username,
    username,
    provider: "basic",
    idv: 2,
    iss: SERVICE,
    aud: SERVICE,
    iat,
    exp: iat + ttl,
    jti: crypto.randomUUID(),
  };
}

const TYP = { alg: "HS256", typ: "svc+jwt" };

// ---------------------------------------------------------------------------------------------

/** Parses `Bearer k="v",k="v"` into its parameters. */
function parseChallenge(h: string | null): Record<string, string> {
  assert.ok(h, "no WWW-Authenticate");
  const m = /^Bearer\s+(.*)$/.exec(h);
  assert.ok(m, `not a Bearer challenge: ${h}`);
  const out: Record<string, string> = {};
  for (const [, k, v] of m[1].matchAll(/(\w+)="([^"]*)"/g)) out[k] = v;
  return out;
}

async function assertChallenged(r: Response, expected: string, what: string): Promise<void> {
  const text = await r.text();
  assert.equal(r.status, 401, `${what}: ${r.status} ${text}`);
  assert.equal(r.headers.get("www-authenticate"), expected, what);
  // a HEAD answer has no body to carry the error
  if (text !== "" || !what.startsWith("HEAD")) {
    await assertError(new Response(text, { status: 401 }), 401, "UNAUTHORIZED");
  }
}

async function assertDenied(r: Response, what: string): Promise<void> {
  const text = await r.text();
  assert.equal(r.status, 403, `${what}: ${r.status} ${text}`);
  await assertError(new Response(text, { status: 403 }), 403, "DENIED");
}

async function assertStatus(r: Response, status: number, what: string): Promise<void> {
  const text = await r.text();
  assert.equal(r.status, status, `${what}: ${r.status} ${text}`);
}

async function getToken(
  s: TestServer,
  headers: Record<string, string> = {},
): Promise<{ token: string; expires_in: number }> {
  const r = await req(s, "/token", { headers });
  const text = await r.text();
  assert.equal(r.status, 200, `GET /token: ${r.status} ${text}`);
  assert.equal(r.headers.get("cache-control"), "no-store");
  assert.match(r.headers.get("content-type") ?? "", /^application\/json/);
  const body = JSON.parse(text);
  assert.equal(typeof body.token, "string");
  assert.equal(typeof body.expires_in, "number");
  return body;
}

async function pushImage(s: TestServer, ns: string, tag: string, headers: Record<string, string>) {
  const data = randomBytes(64);
  const digest = await sha256(data);
  const b = await req(s, `/v2/${ns}/blobs/uploads/?digest=${digest}`, {
    method: "POST",
    body: data as BodyInit,
    headers: { ...headers, "content-type": "application/octet-stream" },
  });
  await assertStatus(b, 201, `push blob ${ns}`);
  const m = await distinctManifest(ns);
  const r = await req(s, `/v2/${ns}/manifests/${tag}`, {
    method: "PUT",
    body: m.body as BodyInit,
    headers: { ...headers, "content-type": OCI_MANIFEST },
  });
  await assertStatus(r, 201, `push ${ns}:${tag}`);
  return { blob: digest, manifest: m.digest };
}

Deno.test({
  name: "token service: challenges, GET /token, bearer use, refusals, malformed headers",
  ...serverTestOpts,
  fn: async (t) => {
    const port = freePort();
    const realm = `http://127.0.0.1:${port}/token`;
    const config = (await identityTables(PASSWORDS)) + tokenService(realm, TTL) + POLICY;
    /** every credential this test sends; none may reach the server's output */
    const secrets: string[] = [SECRET, ...Object.values(PASSWORDS)];
    await withServer({ config, port }, async (s) => {
      const team = await pushImage(s, "team/app", "v1", ROOT);
      const pub = await pushImage(s, "pub/app", "v1", ROOT);
      const challenge = (scope?: string) =>
        `Bearer realm="${realm}",service="${SERVICE}"${scope ? `,scope="${scope}"` : ""}`;

      await t.step("anonymous pulls refused with a pull-scoped Bearer challenge", async () => {
        const pull = challenge("repository:team/app:pull");
        const calls: [string, string][] = [
          ["GET", "/v2/team/app/manifests/v1"],
          ["HEAD", "/v2/team/app/manifests/v1"],
          ["GET", `/v2/team/app/manifests/${team.manifest}`],
          ["GET", `/v2/team/app/blobs/${team.blob}`],
          ["HEAD", `/v2/team/app/blobs/${team.blob}`],
          ["GET", "/v2/team/app/tags/list"],
          ["GET", `/v2/team/app/referrers/${team.manifest}`],
        ];
        for (const [method, path] of calls) {
          await assertChallenged(await req(s, path, { method }), pull, `${method} ${path}`);
        }
      });

      await t.step("anonymous uploads refused with a push scope, deletes with delete", async () => {
        const push = challenge("repository:team/app:pull,push");
        const uuid = crypto.randomUUID();
        const calls: [string, string][] = [
          ["POST", "/v2/team/app/blobs/uploads/"],
          ["POST", `/v2/team/app/blobs/uploads/?mount=${team.blob}&from=pub/app`],
          ["GET", `/v2/team/app/blobs/uploads/${uuid}`],
          ["PATCH", `/v2/team/app/blobs/uploads/${uuid}`],
          ["PUT", `/v2/team/app/blobs/uploads/${uuid}?digest=${team.blob}`],
          ["DELETE", `/v2/team/app/blobs/uploads/${uuid}`],
          ["PUT", "/v2/team/app/manifests/v2"],
        ];
        for (const [method, path] of calls) {
          await assertChallenged(await req(s, path, { method }), push, `${method} ${path}`);
        }
        const del = challenge("repository:team/app:delete");
        for (
          const path of [
            `/v2/team/app/manifests/${team.manifest}`,
            `/v2/team/app/blobs/${team.blob}`,
          ]
        ) {
          await assertChallenged(await req(s, path, { method: "DELETE" }), del, `DELETE ${path}`);
        }
      });

      await t.step("wrong credentials get the same Bearer challenge", async () => {
        const wrong = { authorization: basic("alice", "wrong") };
        await assertChallenged(await req(s, "/v2/", { headers: wrong }), challenge(), "/v2/");
        await assertChallenged(
          await req(s, "/v2/team/app/tags/list", { headers: wrong }),
          challenge("repository:team/app:pull"),
          "tags",
        );
        await assertChallenged(await req(s, "/token", { headers: wrong }), challenge(), "/token");
      });

      await t.step("a client following the challenge gets in", async () => {
        const r = await req(s, "/v2/team/app/manifests/v1", { headers: { accept: OCI_MANIFEST } });
        await r.body?.cancel();
        const c = parseChallenge(r.headers.get("www-authenticate"));
        const u = new URL(c.realm);
        u.searchParams.set("service", c.service);
        u.searchParams.set("scope", c.scope);
        const tr = await fetch(u, { headers: ALICE, signal: AbortSignal.timeout(20_000) });
        assert.equal(tr.status, 200);
        const { token } = await tr.json();
        secrets.push(token);
        const again = await req(s, "/v2/team/app/manifests/v1", {
          headers: { ...bearer(token), accept: OCI_MANIFEST },
        });
        assert.equal(again.status, 200);
        assert.equal(again.headers.get("docker-content-digest"), team.manifest);
        await again.body?.cancel();
      });

      await t.step("GET /token anonymous: a token carrying no identity", async () => {
        const { token, expires_in } = await getToken(s);
        secrets.push(token);
        assert.equal(expires_in, TTL);
        const { header, payload } = decodeJwt(token);
        assert.equal(header.typ, "svc+jwt");
        assert.equal(header.alg, "HS256");
        for (const k of ["username", "id", "claims"]) {
          assert.equal(payload[k], undefined, `anonymous token carries ${k}`);
        }
        assert.equal(payload.provider, "anonymous");
        assert.equal(Number(payload.exp) - Number(payload.iat), TTL);
        // what anonymous may do, the token may do
        await assertStatus(
          await req(s, "/v2/pub/app/tags/list", { headers: bearer(token) }),
          200,
          "pub",
        );
        await assertStatus(
          await req(s, `/v2/pub/app/blobs/${pub.blob}`, { headers: bearer(token) }),
          200,
          "pub blob",
        );
        // and nothing more: refused as anonymous, with the challenge that sends the client
        // back for credentials
        const refused: [string, string, string][] = [
          ["GET", "/v2/team/app/tags/list", "repository:team/app:pull"],
          ["POST", "/v2/pub/app/blobs/uploads/", "repository:pub/app:pull,push"],
          ["GET", "/v2/_catalog", "registry:catalog:*"],
        ];
        for (const [method, path, scope] of refused) {
          const r = await req(s, path, { method, headers: bearer(token) });
          await assertChallenged(r, challenge(scope), `${method} ${path} with an anonymous token`);
        }
      });

      await t.step(
        "GET /token with Basic alice: the token authorizes alice's actions",
        async () => {
          const { token } = await getToken(s, ALICE);
          secrets.push(token);
          const { header, payload } = decodeJwt(token);
          assert.equal(header.typ, "svc+jwt");
          assert.equal(payload.username, "alice");
          assert.equal(payload.provider, "basic");
          assert.equal(payload.id, "alice");
          assert.equal(payload.password, undefined);
          assert.ok(!JSON.stringify(payload).includes(PASSWORDS.alice));
          const pushed = await pushImage(s, "team/tok", "v1", bearer(token));
          const r = await req(s, "/v2/team/tok/manifests/v1", {
            headers: { ...bearer(token), accept: OCI_MANIFEST },
          });
          assert.equal(r.status, 200);
          assert.equal(r.headers.get("docker-content-digest"), pushed.manifest);
          await r.body?.cancel();
          // schemes are case-insensitive
          await assertStatus(
            await req(s, "/v2/team/tok/tags/list", {
              headers: { authorization: `bearer ${token}` },
            }),
            200,
            "lowercase bearer",
          );
          // alice has no grant on pub/*: authenticated, so 403
          await assertDenied(
            await req(s, "/v2/pub/app/tags/list", { headers: bearer(token) }),
            "pub",
          );
        },
      );

      await t.step("a token for bob pulls team/app but cannot push", async () => {
        const { token } = await getToken(s, BOB);
        secrets.push(token);
        assert.equal(decodeJwt(token).payload.username, "bob");
        await assertStatus(
          await req(s, "/v2/team/app/tags/list", { headers: bearer(token) }),
          200,
          "bob pull",
        );
        await assertDenied(
          await req(s, "/v2/team/app/blobs/uploads/", { method: "POST", headers: bearer(token) }),
          "bob push",
        );
      });

      await t.step("a registry token presented to /token is 401", async () => {
        for (const who of [{}, ALICE]) {
          const { token } = await getToken(s, who);
          secrets.push(token);
          const r = await req(s, "/token", { headers: bearer(token) });
          await assertChallenged(r, challenge(), "token for a token");
        }
      });

      await t.step("POST /token is 405 with Allow: GET", async () => {
        for (const headers of [{}, ALICE]) {
          const r = await req(s, "/token", {
            method: "POST",
            body: "grant_type=password&username=alice",
            headers: { ...headers, "content-type": "application/x-www-form-urlencoded" },
          });
          const text = await r.text();
          assert.equal(r.status, 405, text);
          assert.equal(r.headers.get("allow"), "GET");
          assert.ok(Array.isArray(JSON.parse(text).errors), text);
        }
      });

      await t.step("tokens signed elsewhere or altered are 401", async () => {
        const { token } = await getToken(s, BOB);
        secrets.push(token);
        const [h, p, sig] = token.split(".");
        const payload = decodeJwt(token).payload;
        const forged: [string, string][] = [
          ["another secret", await hs256(TYP, claims("alice"), enc.encode("x".repeat(48)))],
          ["bob's token renamed alice", `${h}.${part({ ...payload, username: "alice" })}.${sig}`],
          ["bob's token with a longer exp", `${h}.${part({ ...payload, exp: 4102444800 })}.${sig}`],
          ["flipped signature", `${h}.${p}.${sig.startsWith("A") ? "B" : "A"}${sig.slice(1)}`],
          ["signature cut", `${h}.${p}.${sig.slice(0, 20)}`],
          ["header swapped to alg none", `${part({ alg: "none", typ: "svc+jwt" })}.${p}.${sig}`],
          [
            "right secret, wrong audience",
            await hs256(TYP, { ...claims("alice"), aud: "other" }, enc.encode(SECRET)),
          ],
          [
            "right secret, no jti",
            await hs256(TYP, { ...claims("alice"), jti: undefined }, enc.encode(SECRET)),
          ],
          [
            "right secret, already expired",
            await hs256(
              TYP,
              { ...claims("alice"), exp: Math.floor(Date.now() / 1000) - 60 },
              enc.encode(SECRET),
            ),
          ],
        ];
        for (const [what, jwt] of forged) {
          secrets.push(jwt);
          // /v2/ is open to anonymous callers: only the bad credential explains a 401
          await assertChallenged(await req(s, "/v2/", { headers: bearer(jwt) }), challenge(), what);
          await assertChallenged(
            await req(s, "/v2/team/app/tags/list", { headers: bearer(jwt) }),
            challenge("repository:team/app:pull"),
            what,
          );
        }
        // the real token still works, so the forgeries failed on their defects
        await assertStatus(
          await req(s, "/v2/team/app/tags/list", { headers: bearer(token) }),
          200,
          "bob",
        );
      });

      await t.step("malformed Authorization headers are 401, never 5xx", async () => {
        const randomKey = randomBytes(32);
        const cases: [string, string][] = [
          ["bad base64", "Basic %%%not*base64%%%"],
          ["base64 of invalid UTF-8", `Basic ${btoa("\xff\xfe:\xfd")}`],
          ["missing colon", `Basic ${btoa(`alice${PASSWORDS.alice}`)}`],
          ["empty scheme", ` ${btoa(`alice:${PASSWORDS.alice}`)}`],
          ["unknown scheme", `Digest ${btoa(`alice:${PASSWORDS.alice}`)}`],
          ["unknown scheme with parameters", 'Digest username="alice", realm="wharf"'],
          ["Basic with nothing", "Basic"],
          ["Bearer with nothing", "Bearer"],
          ["Basic with two values", `Basic ${btoa("alice:x")} ${btoa("bob:y")}`],
          ["Bearer not a JWT", "Bearer not-a-jwt"],
          ["Bearer with non-JSON parts", "Bearer a.b.c"],
          ["huge Basic (20 KiB)", `Basic ${"QUFB".repeat(5 * 1024)}`],
          ["huge Bearer (20 KiB)", `Bearer ${"x".repeat(20 * 1024)}`],
          [
            "JWT alg none",
            `Bearer ${part({ alg: "none", typ: "svc+jwt" })}.${part(claims("alice"))}.`,
          ],
          [
            "JWT alg none without typ",
            `Bearer ${part({ alg: "none" })}.${part(claims("alice"))}.`,
          ],
          ["JWT HS256 random key", `Bearer ${await hs256(TYP, claims("alice"), randomKey)}`],
          [
            "JWT HS256 random key, no typ",
            `Bearer ${await hs256({ alg: "HS256" }, claims("alice"), randomKey)}`,
          ],
          [
            "svc+jwt with garbage signature",
            `Bearer ${part(TYP)}.${part(claims("alice"))}.${b64url(randomBytes(32))}`,
          ],
          ["svc+jwt with an empty signature", `Bearer ${part(TYP)}.${part(claims("alice"))}.`],
          [
            "a registry token via Basic",
            `Basic ${btoa(`alice:${await hs256(TYP, claims("alice"), randomKey)}`)}`,
          ],
        ];
        // /v2/ and pub/app are open to anonymous callers: only the bad header explains a 401
        const targets: [string, string | undefined][] = [
          ["/v2/", undefined],
          ["/v2/pub/app/tags/list", "repository:pub/app:pull"],
        ];
        for (const [what, authorization] of cases) {
          const credential = authorization.replace(/^\s*\S+\s+/, "");
          if (credential.length >= 16) secrets.push(credential);
          for (const [path, scope] of targets) {
            const r = await req(s, path, { headers: { authorization } });
            assert.ok(r.status < 500, `${what} on ${path}: ${r.status}`);
            await assertChallenged(r, challenge(scope), `${what} on ${path}`);
          }
        }
      });

      await t.step(
        "headers fetch cannot send (raw socket): 401, or 4xx from HTTP framing",
        async () => {
          const good = `Basic ${btoa(`alice:${PASSWORDS.alice}`)}`;
          const cases: [string, [string, string][]][] = [
            ["non-ASCII bytes in Basic", [["Authorization", "Basic \u00e9\u00e8\u00ff"]]],
            ["non-ASCII bytes in Bearer", [["Authorization", "Bearer \u00ff\u00fe.a.b"]]],
            ["two Authorization headers", [["Authorization", good], ["Authorization", good]]],
          ];
          for (const [what, headers] of cases) {
            const r = await sendRaw(s.port, { method: "GET", target: "/v2/", headers });
            assert.equal(r.status, 401, `${what}: ${r.status} ${r.error ?? ""}`);
            assert.equal(r.headers.get("www-authenticate"), challenge(), what);
            assert.equal(JSON.parse(dec.decode(r.body)).errors[0].code, "UNAUTHORIZED", what);
          }
          // beyond the HTTP layer's header limit the request never reaches Wharf: a 4xx, not 5xx
          const r = await sendRaw(s.port, {
            method: "GET",
            target: "/v2/",
            headers: [["Authorization", `Basic ${"QUFB".repeat(20 * 1024)}`]],
          });
          assert.ok(
            r.status >= 400 && r.status < 500,
            `80 KiB header: ${r.status} ${r.error ?? ""}`,
          );
        },
      );

      await t.step("after the malformed batch the server answers normally", async () => {
        const v2 = await req(s, "/v2/");
        assert.equal(v2.status, 200);
        assert.deepEqual(await v2.json(), {});
        await assertStatus(await req(s, "/healthz"), 200, "healthz");
        await assertStatus(await req(s, "/v2/pub/app/tags/list"), 200, "anonymous pull");
        const { token } = await getToken(s, ALICE);
        secrets.push(token);
        await assertStatus(
          await req(s, "/v2/team/app/tags/list", { headers: bearer(token) }),
          200,
          "alice",
        );
      });

      await t.step("no password, secret or token appears in the server output", () => {
        const out = s.output();
        assert.match(out, /listening on/);
        for (const x of secrets) {
          assert.ok(!out.includes(x), `server output contains a credential: ${x.slice(0, 24)}…`);
        }
        for (const h of [ROOT, ALICE, BOB]) {
          assert.ok(
            !out.includes(h.authorization.slice(6)),
            "server output contains Basic credentials",
          );
        }
      });
    });
  },
});

Deno.test({
  name: "token service: an expired token is 401; service defaults to the realm's host",
  ...serverTestOpts,
  fn: async (t) => {
    const realm = "https://auth.example.test:8443/token";
    const config = (await identityTables(PASSWORDS)) + tokenService(realm, 1, null) + POLICY;
    await withServer({ config }, async (s) => {
      const expected = `Bearer realm="${realm}",service="auth.example.test:8443"`;

      await t.step("the challenge names the realm's host as service", async () => {
        await assertChallenged(
          await req(s, "/v2/", { headers: { authorization: basic("alice", "nope") } }),
          expected,
          "wrong password",
        );
      });

      await t.step("a ttl_secs=1 token works at once and is refused after it expires", async () => {
        // Token times have one-second resolution: start just past a second boundary so the
        // first use falls inside the token's single second.
        await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 30));
        const { token, expires_in } = await getToken(s, ALICE);
        assert.equal(expires_in, 1);
        const { payload } = decodeJwt(token);
        assert.equal(payload.aud, "auth.example.test:8443");
        assert.equal(Number(payload.exp) - Number(payload.iat), 1);
        await assertStatus(
          await req(s, "/v2/team/app/tags/list", { headers: bearer(token) }),
          404,
          "fresh token: alice's route (NAME_UNKNOWN)",
        );
        await new Promise((r) => setTimeout(r, 2200));
        // /v2/ is open to anonymous callers: only the expired credential explains a 401
        await assertChallenged(
          await req(s, "/v2/", { headers: bearer(token) }),
          expected,
          "expired token",
        );
        await assertChallenged(
          await req(s, "/v2/team/app/tags/list", { headers: bearer(token) }),
          `${expected},scope="repository:team/app:pull"`,
          "expired token on a namespace",
        );
      });
    });
  },
});

Deno.test({
  name: "without [auth.token_service], /token is 404 and challenges are Basic",
  ...serverTestOpts,
  fn: () =>
    withServer({}, async (s) => {
      const r = await req(s, "/token");
      await assertError(r, 404, "NAME_UNKNOWN");
      const t = await req(s, "/token", { headers: { authorization: basic("alice", "x") } });
      await t.body?.cancel();
      assert.equal(t.status, 401);
      assert.match(t.headers.get("www-authenticate") ?? "", /^Basic realm="wharf"/);
      // a well-formed registry token means nothing to a server without a token service
      const jwt = await hs256(TYP, claims("alice"), enc.encode(SECRET));
      const b = await req(s, "/v2/", { headers: bearer(jwt) });
      await b.body?.cancel();
      assert.equal(b.status, 401);
      assert.match(b.headers.get("www-authenticate") ?? "", /^Basic realm="wharf"/);
    }),
});
