// Issue 35 item 6 (docs/auth.md §mTLS, "X.509 v1 client certificates"): a v1 certificate (no
// extensions, as `openssl x509 -req` without `-extfile` and older CAs issue) signed by the trusted
// CA is refused, never served as anonymous: under client_auth = "optional" every request on the
// connection answers 401 naming the v1 certificate (whatever Authorization says); under
// "required" the handshake fails. Deno's fetch will not even load a v1 certificate, so the client
// here is node:https.
import assert from "node:assert/strict";
import { request } from "node:https";
import { serverTestOpts } from "../helpers/api.ts";
import { makeClientCert, makePki, opensslMissing, tlsTable } from "../helpers/certs.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { hashPassword } from "../../lib/auth/mod.ts";

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

interface Pem {
  ca: string;
  cert?: string;
  key?: string;
}

/** One GET over its own TLS connection (agent: false), presenting `pem.cert` when given. */
function get(s: TestServer, path: string, pem: Pem, headers: Record<string, string> = {}) {
  return new Promise<Answer>((resolve, reject) => {
    const r = request({
      host: "127.0.0.1",
      port: s.port,
      path,
      method: "GET",
      headers,
      ca: pem.ca,
      cert: pem.cert,
      key: pem.key,
      agent: false,
      timeout: 20_000,
    }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d) => body += d);
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.on("error", reject);
    });
    r.on("timeout", () => r.destroy(new Error("timeout")));
    r.on("error", reject);
    r.end();
  });
}

async function withV1(
  clientAuth: "optional" | "required",
  fn: (s: TestServer, v1: Pem, none: Pem, v3: Pem) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-pki-" });
  try {
    const pki = await makePki(dir);
    const made = await makeClientCert(dir, pki, "old", "/CN=carol/O=Acme/OU=ops", { v1: true });
    // The certificate really is v1: no version field, no extensions.
    const text = await new Deno.Command("openssl", {
      args: ["x509", "-in", made.cert, "-noout", "-text"],
      stdout: "piped",
    }).output();
    const dump = new TextDecoder().decode(text.stdout);
    assert.match(dump, /Version: 1 \(0x0\)/);
    assert.doesNotMatch(dump, /X509v3 extensions/);
    const ca = await Deno.readTextFile(pki.caCert);
    const v1 = {
      ca,
      cert: await Deno.readTextFile(made.cert),
      key: await Deno.readTextFile(made.key),
    };
    const v3 = {
      ca,
      cert: await Deno.readTextFile(pki.clientCert),
      key: await Deno.readTextFile(pki.clientKey),
    };
    const config = `
${tlsTable(pki, clientAuth)}
[auth.identity.bob]
username = "bob"
password = ${JSON.stringify(await hashPassword("pw"))}

[global.access_policy]
default = "deny"
rules = [
  'request.action in ["healthz", "get-api-version"]',
  # carol's subject, if it were ever believed
  'has(identity.certificate) && identity.certificate.common_name == "carol"',
  'request.namespace == "cert/alice" && has(identity.certificate) && identity.certificate.common_name == "alice"',
]
`;
    await withServer({ config }, (s) => fn(s, v1, { ca }, v3));
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

const MISSING = opensslMissing("X.509 v1");

function assertV1Refusal(a: Answer, what: string): void {
  assert.equal(a.status, 401, `${what}: ${a.status} ${a.body}`);
  const e = JSON.parse(a.body).errors[0];
  assert.equal(e.code, "UNAUTHORIZED", what);
  assert.match(e.detail, /client certificate refused: .*X\.509 v1/, what);
  assert.match(e.detail, /reissue it as v3/, what);
}

Deno.test({
  name: 'X.509 v1 client certificate, client_auth = "optional": 401 naming it, never anonymous',
  ignore: MISSING,
  ...serverTestOpts,
  fn: () =>
    withV1("optional", async (s, v1, none, v3) => {
      // /v2/ and /healthz are open to anonymous callers: only the certificate explains a 401
      for (const path of ["/v2/", "/healthz", "/v2/cert/carol/tags/list"]) {
        assertV1Refusal(await get(s, path, v1), `v1 on ${path}`);
      }
      // a valid Basic header does not make the refused certificate acceptable
      const bob = { authorization: `Basic ${btoa("bob:pw")}` };
      assertV1Refusal(await get(s, "/v2/", v1, bob), "v1 + Basic bob");
      // without a certificate the same server serves anonymous callers as the policy says
      assert.equal((await get(s, "/v2/", none)).status, 200);
      assert.equal((await get(s, "/v2/cert/alice/tags/list", none)).status, 401);
      // and a v3 certificate from the same CA authenticates
      const alice = await get(s, "/v2/cert/alice/tags/list", v3);
      assert.equal(alice.status, 404, alice.body); // authorized; the repository does not exist
    }),
});

Deno.test({
  name: 'X.509 v1 client certificate, client_auth = "required": the handshake fails',
  ignore: MISSING,
  ...serverTestOpts,
  fn: () =>
    withV1("required", async (s, v1, _none, v3) => {
      await assert.rejects(get(s, "/v2/", v1), (e: Error) => {
        assert.match(e.message, /socket hang up|ECONNRESET|reset|closed|handshake/i, e.message);
        return true;
      });
      assert.equal((await get(s, "/v2/", v3)).status, 200);
    }),
});
