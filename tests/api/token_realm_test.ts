// auth.token_service.realm left unset: the Bearer challenge names the token endpoint of the
// origin the client used — its Host, or X-Forwarded-Proto/-Host when (and only when) the peer
// is a trusted proxy — so one config serves every replica and hostname behind a balancer.
import assert from "node:assert/strict";
import { serverTestOpts } from "../helpers/api.ts";
import { withServer } from "../helpers/server.ts";

const TS = `
[auth.token_service]
secret_key = "realm-test-secret-0123456789abcdef0123"
service = "wharf.lb"

[global.access_policy]
default = "deny"
rules = ['request.action in ["healthz", "get-token"]']
`;

/** Sends a request head as written (Host included) and returns the whole answer as text. */
async function sendRaw(port: number, head: string): Promise<string> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  await conn.write(new TextEncoder().encode(head));
  return await new Response(conn.readable).text();
}

function realmOf(h: string | null): string | null {
  return /realm="([^"]*)"/.exec(h ?? "")?.[1] ?? null;
}

Deno.test({
  name: "token realm: derived from Host when unset; X-Forwarded-* ignored from untrusted peers",
  ...serverTestOpts,
  async fn() {
    await withServer({ config: TS }, async (s) => {
      const r = await fetch(`${s.url}/v2/`);
      await r.body?.cancel();
      assert.equal(r.status, 401);
      const ch = r.headers.get("www-authenticate")!;
      assert.equal(realmOf(ch), `http://127.0.0.1:${s.port}/token`);
      assert.match(ch, /service="wharf\.lb"/);
      // Another hostname for the same replica.
      const other = await sendRaw(
        s.port,
        "GET /v2/ HTTP/1.1\r\nHost: registry.example.com:8443\r\nConnection: close\r\n\r\n",
      );
      assert.match(other, /realm="http:\/\/registry\.example\.com:8443\/token"/);
      // Not a trusted proxy: its X-Forwarded-* are not believed.
      const spoof = await sendRaw(
        s.port,
        "GET /v2/ HTTP/1.1\r\nHost: a.example\r\nX-Forwarded-Proto: https\r\nX-Forwarded-Host: evil.example\r\nConnection: close\r\n\r\n",
      );
      assert.match(spoof, /realm="http:\/\/a\.example\/token"/);
      // A Host that is not a host name never reaches the header.
      const bad = await sendRaw(
        s.port,
        'GET /v2/ HTTP/1.1\r\nHost: x",evil="1\r\nConnection: close\r\n\r\n',
      );
      assert.doesNotMatch(bad, /evil/);
      // The token endpoint the challenge names works.
      const tok = await fetch(`${realmOf(ch)}?service=wharf.lb`);
      assert.equal(tok.status, 200);
      assert.ok((await tok.json()).token);
    });
  },
});

Deno.test({
  name: "token realm: a trusted proxy's X-Forwarded-Proto and X-Forwarded-Host name the realm",
  ...serverTestOpts,
  async fn() {
    await withServer({ config: TS, server: 'trusted_proxies = ["127.0.0.1"]' }, async (s) => {
      const r = await fetch(`${s.url}/v2/`, {
        headers: {
          "x-forwarded-proto": "https",
          "x-forwarded-host": "registry.example.org, lb.internal",
        },
      });
      await r.body?.cancel();
      assert.equal(
        realmOf(r.headers.get("www-authenticate")),
        "https://registry.example.org/token",
      );
      // Only the Host when the proxy sends no X-Forwarded-Host.
      const p = await fetch(`${s.url}/v2/`, { headers: { "x-forwarded-proto": "https" } });
      await p.body?.cancel();
      assert.equal(
        realmOf(p.headers.get("www-authenticate")),
        `https://127.0.0.1:${s.port}/token`,
      );
    });
  },
});

Deno.test({
  name: "token realm: a configured realm is used as is, whatever the request says",
  ...serverTestOpts,
  async fn() {
    const cfg = TS.replace('service = "wharf.lb"', 'realm = "https://auth.example/token"');
    await withServer({ config: cfg, server: 'trusted_proxies = ["127.0.0.1"]' }, async (s) => {
      const r = await fetch(`${s.url}/v2/`, { headers: { "x-forwarded-host": "other.example" } });
      await r.body?.cancel();
      const ch = r.headers.get("www-authenticate")!;
      assert.equal(realmOf(ch), "https://auth.example/token");
      assert.match(ch, /service="auth\.example"/);
    });
  },
});
