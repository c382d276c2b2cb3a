// docs/auth.md §mTLS against a real Wharf HTTPS listener: client_auth "optional" (no certificate
// is anonymous, a verified one becomes identity.certificate, an untrusted one never does, and a
// Basic header adds its identity to the certificate) and "required" (no verified certificate, no
// handshake), plus a multi-MiB blob push and pull proving the listener streams bodies byte-exact.
import assert from "node:assert/strict";
import { assertError, serverTestOpts } from "../helpers/api.ts";
import { concat, randomBytes, sha256 } from "../helpers/bytes.ts";
import { makePki, opensslMissing, type Pki, tlsTable } from "../helpers/certs.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { hashPassword } from "../../lib/auth/mod.ts";

const MISSING = opensslMissing("mTLS");

const BOB_PASSWORD = "builder-secret";

function tlsConfig(pki: Pki, clientAuth: "optional" | "required", bobHash: string): string {
  return `
${tlsTable(pki, clientAuth)}
[auth.identity.bob]
username = "bob"
password = ${JSON.stringify(bobHash)}

[global.access_policy]
default = "deny"
rules = [
  'request.action in ["healthz", "readyz", "get-api-version"]',
  'request.namespace == "cert/cn" && has(identity.certificate) && identity.certificate.common_name == "alice"',
  'request.namespace == "cert/bob" && has(identity.certificate) && identity.certificate.common_name == "bob"',
  'request.namespace == "cert/org" && has(identity.certificate) && "Acme" in identity.certificate.organizations && "Acme Labs" in identity.certificate.organizations',
  'request.namespace == "cert/ou" && has(identity.certificate) && "ops" in identity.certificate.organizational_units',
  'request.namespace == "cert/mtls-id" && has(identity.provider) && identity.provider == "mtls" && identity.username == "alice" && identity.id == "alice"',
  'request.namespace == "cert/both" && has(identity.certificate) && identity.certificate.common_name == "alice" && has(identity.provider) && identity.provider == "basic" && identity.username == "bob"',
  'request.namespace == "basic/only" && has(identity.username) && identity.username == "bob"',
  'request.namespace.startsWith("blobs/") && has(identity.certificate) && identity.certificate.common_name == "alice"',
]
`;
}

type Who = "none" | "alice" | "mallory";

interface Clients {
  pki: Pki;
  client(who: Who): Deno.HttpClient;
  close(): void;
}

async function clients(pki: Pki): Promise<Clients> {
  const ca = await Deno.readTextFile(pki.caCert);
  const made: Deno.HttpClient[] = [];
  const files: Record<Who, [string, string] | null> = {
    none: null,
    alice: [pki.clientCert, pki.clientKey],
    mallory: [pki.otherClientCert, pki.otherClientKey],
  };
  const pem: Partial<Record<Who, { cert: string; key: string }>> = {};
  for (const [who, f] of Object.entries(files) as [Who, [string, string] | null][]) {
    if (f) pem[who] = { cert: await Deno.readTextFile(f[0]), key: await Deno.readTextFile(f[1]) };
  }
  return {
    pki,
    // A fresh client per call: no pooled connection (and its handshake) is reused across cases.
    client(who) {
      const c = Deno.createHttpClient({ caCerts: [ca], ...pem[who] });
      made.push(c);
      return c;
    },
    close() {
      for (const c of made) c.close();
    },
  };
}

async function call(
  s: TestServer,
  cs: Clients,
  who: Who,
  path: string,
  init: RequestInit = {},
): Promise<Response> {
  const url = new URL(path, s.url);
  assert.equal(url.protocol, "https:");
  const withClient: RequestInit & { client: Deno.HttpClient } = {
    ...init,
    client: cs.client(who),
    signal: AbortSignal.timeout(20_000),
  };
  return await fetch(url, withClient);
}

const basic = (user: string, pass: string) => ({
  authorization: `Basic ${btoa(`${user}:${pass}`)}`,
});

async function assertAllowed(r: Response, what: string): Promise<void> {
  assert.equal(r.status, 404, `${what}: expected the route (404 NAME_UNKNOWN), got ${r.status}`);
  await assertError(r, 404, "NAME_UNKNOWN");
}

async function assertUnauthorized(r: Response, what: string): Promise<void> {
  assert.equal(r.status, 401, `${what}: ${r.status} ${await r.clone().text()}`);
  assert.match(r.headers.get("www-authenticate") ?? "", /^Basic realm="wharf"/, what);
  await assertError(r, 401, "UNAUTHORIZED");
}

async function assertDenied(r: Response, what: string): Promise<void> {
  assert.equal(r.status, 403, `${what}: ${r.status} ${await r.clone().text()}`);
  await assertError(r, 403, "DENIED");
}

/** Runs `fn` with a fresh PKI, bob's hash, and a TLS server in the given client_auth mode. */
async function withTlsServer(
  clientAuth: "optional" | "required",
  fn: (s: TestServer, cs: Clients) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-pki-" });
  let cs: Clients | null = null;
  try {
    const pki = await makePki(dir);
    cs = await clients(pki);
    const config = tlsConfig(pki, clientAuth, await hashPassword(BOB_PASSWORD));
    const opened = cs;
    await withServer({ config }, async (s) => {
      assert.ok(s.url.startsWith("https://127.0.0.1:"), s.url);
      await fn(s, opened);
    });
  } finally {
    cs?.close();
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

/** getRandomValues gives at most 64 KiB per call. */
function bigRandom(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let at = 0; at < n; at += 65_536) out.set(randomBytes(Math.min(65_536, n - at)), at);
  return out;
}

const tags = (ns: string) => `/v2/${ns}/tags/list`;

Deno.test({
  name: 'mTLS client_auth = "optional": anonymous, certificate identity, untrusted CA, + Basic',
  ignore: MISSING,
  ...serverTestOpts,
  fn: (t) =>
    withTlsServer("optional", async (s, cs) => {
      await t.step("no client certificate: anonymous, the policy decides", async () => {
        const v2 = await call(s, cs, "none", "/v2/");
        assert.equal(v2.status, 200);
        await v2.body?.cancel();
        for (const ns of ["cert/cn", "cert/org", "cert/ou", "cert/mtls-id"]) {
          await assertUnauthorized(await call(s, cs, "none", tags(ns)), `anonymous ${ns}`);
        }
      });

      await t.step(
        "alice's certificate: common_name, organizations, OUs visible to CEL",
        async () => {
          await assertAllowed(await call(s, cs, "alice", tags("cert/cn")), "CN alice");
          await assertAllowed(await call(s, cs, "alice", tags("cert/org")), "O Acme + Acme Labs");
          await assertAllowed(await call(s, cs, "alice", tags("cert/ou")), "OU ops");
          // with no Authorization header the certificate is also id = username = CN, provider mtls
          await assertAllowed(await call(s, cs, "alice", tags("cert/mtls-id")), "mtls identity");
          // the caller is authenticated, so a refusal is 403, not a challenge
          await assertDenied(await call(s, cs, "alice", tags("cert/bob")), "CN is not bob");
          await assertDenied(await call(s, cs, "alice", tags("basic/only")), "alice is not bob");
        },
      );

      await t.step("mallory (another CA): refused or anonymous, never a certificate", async () => {
        // mallory's subject has O=Acme, OU=ops: cert/ou would open if it were trusted
        for (const ns of ["cert/ou", "cert/cn", "cert/mtls-id"]) {
          let r: Response;
          try {
            r = await call(s, cs, "mallory", tags(ns));
          } catch (e) {
            assert.ok(e instanceof TypeError, `handshake refusal, got ${e}`);
            continue;
          }
          await assertUnauthorized(r, `mallory ${ns}`);
        }
      });

      await t.step("certificate + Basic: both identities (docs/auth.md)", async () => {
        const bob = { headers: basic("bob", BOB_PASSWORD) };
        await assertAllowed(await call(s, cs, "alice", tags("cert/both"), bob), "alice cert + bob");
        // the header's identity replaces the mtls one: provider basic, username bob
        await assertDenied(await call(s, cs, "alice", tags("cert/mtls-id"), bob), "not mtls");
        // the certificate is read from the connection whatever the header says
        await assertAllowed(await call(s, cs, "alice", tags("cert/cn"), bob), "cert still there");
        await assertAllowed(await call(s, cs, "alice", tags("basic/only"), bob), "bob via Basic");
        // without the certificate bob alone is not enough for cert/both
        await assertAllowed(await call(s, cs, "none", tags("basic/only"), bob), "bob, no cert");
        await assertDenied(await call(s, cs, "none", tags("cert/both"), bob), "bob, no cert");
      });

      await t.step(
        "certificate + wrong Basic password: 401, the certificate does not save it",
        async () => {
          const wrong = { headers: basic("bob", "not-the-password") };
          await assertUnauthorized(await call(s, cs, "alice", tags("cert/cn"), wrong), "wrong pw");
          await assertUnauthorized(await call(s, cs, "alice", "/v2/", wrong), "wrong pw on /v2/");
        },
      );

      await t.step("a few MiB blob push + pull over TLS round-trips byte-exact", async () => {
        const ns = "blobs/tls";
        // monolithic POST with a known length
        const mono = bigRandom(5 * 1024 * 1024 + 17);
        const monoDigest = await sha256(mono);
        const post = await call(s, cs, "alice", `/v2/${ns}/blobs/uploads/?digest=${monoDigest}`, {
          method: "POST",
          body: mono as BodyInit,
          headers: { "content-type": "application/octet-stream" },
        });
        assert.equal(post.status, 201, await post.text());
        assert.equal(post.headers.get("docker-content-digest"), monoDigest);

        // a chunked (no Content-Length) PATCH streamed in 64 KiB pieces, then PUT
        const parts = Array.from({ length: 64 }, () => randomBytes(64 * 1024));
        const streamed = concat(...parts);
        const digest = await sha256(streamed);
        const start = await call(s, cs, "alice", `/v2/${ns}/blobs/uploads/`, { method: "POST" });
        assert.equal(start.status, 202, await start.text());
        const loc = new URL(start.headers.get("location")!, s.url);
        let i = 0;
        const body = new ReadableStream<Uint8Array>({
          pull(c) {
            if (i < parts.length) c.enqueue(parts[i++]);
            else c.close();
          },
        });
        const patch = await call(s, cs, "alice", loc.href, {
          method: "PATCH",
          body,
          headers: { "content-type": "application/octet-stream" },
          duplex: "half",
        } as RequestInit);
        assert.equal(patch.status, 202, await patch.text());
        assert.equal(patch.headers.get("range"), `0-${streamed.length - 1}`);
        const put = new URL(patch.headers.get("location")!, s.url);
        put.searchParams.set("digest", digest);
        const done = await call(s, cs, "alice", put.href, { method: "PUT" });
        assert.equal(done.status, 201, await done.text());

        for (const [want, d] of [[mono, monoDigest], [streamed, digest]] as const) {
          const r = await call(s, cs, "alice", `/v2/${ns}/blobs/${d}`);
          assert.equal(r.status, 200);
          assert.equal(r.headers.get("content-length"), String(want.length));
          assert.equal(r.headers.get("docker-content-digest"), d);
          const got = new Uint8Array(await r.arrayBuffer());
          assert.equal(got.length, want.length);
          assert.equal(await sha256(got), d);
          assert.deepEqual(got, want);
        }
        // the same blob is not readable without alice's certificate
        await assertUnauthorized(
          await call(s, cs, "none", `/v2/${ns}/blobs/${digest}`),
          "blob without certificate",
        );
      });
    }),
});

Deno.test({
  name: 'mTLS client_auth = "required": no verified certificate, no handshake',
  ignore: MISSING,
  ...serverTestOpts,
  fn: (t) =>
    withTlsServer("required", async (s, cs) => {
      await t.step("no client certificate: the TLS handshake fails", async () => {
        await assert.rejects(call(s, cs, "none", "/v2/"), TypeError);
      });

      await t.step("mallory (another CA): the TLS handshake fails", async () => {
        await assert.rejects(call(s, cs, "mallory", "/v2/"), TypeError);
      });

      await t.step("alice: served, with her certificate identity", async () => {
        const v2 = await call(s, cs, "alice", "/v2/");
        assert.equal(v2.status, 200);
        await v2.body?.cancel();
        await assertAllowed(await call(s, cs, "alice", tags("cert/cn")), "CN alice");
        await assertAllowed(await call(s, cs, "alice", tags("cert/ou")), "OU ops");
        await assertDenied(await call(s, cs, "alice", tags("cert/bob")), "CN is not bob");
      });
    }),
});
