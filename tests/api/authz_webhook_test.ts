// The authorization webhook (issue 14): asked after the CEL policies allow, with the request in
// headers; 2xx allows, 401/403 denies and is remembered for cache_ttl_secs, anything else or a
// timeout denies without being remembered; listings are not gated; metrics count decisions.
import assert from "node:assert/strict";
import { assertErrorCode, req, serverTestOpts } from "../helpers/api.ts";
import { pushImage, withServer } from "../helpers/server.ts";
import { startReceiver } from "../helpers/webhook_receiver.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

Deno.test(
  "authorization webhook: allow, deny cached for the TTL, errors and timeouts not cached",
  serverTestOpts,
  async () => {
    const g = startReceiver();
    const special = startReceiver();
    try {
      await withServer({
        config: `
[global]
authorization_webhook = "central"

[global.access_policy]
default = "allow"
rules = ['has(request.namespace) && request.namespace == "cel/blocked"']

[auth.webhook.central]
url = "${g.url}/authz"
timeout_ms = 400
cache_ttl_secs = 2
forward_headers = ["X-Request-Team"]

[auth.webhook.strict]
url = "${special.url}/authz"

[repository.special]
authorization_webhook = "strict"
`,
      }, async (s) => {
        const img = await pushImage(s.url, "app/one", "v1");
        const pushCalls = g.calls.length;
        assert.ok(pushCalls >= 3, "uploads and the manifest push were asked");
        const get = (path: string, headers: Record<string, string> = {}) =>
          req(s, path, { headers });

        // Allowed: the request is described in headers.
        const ok = await get(`/v2/app/one/manifests/v1`, { "X-Request-Team": "blue" });
        assert.equal(ok.status, 200);
        await ok.body?.cancel();
        const h = g.calls.at(-1)!;
        assert.equal(h.get("x-svc-action"), "get-manifest");
        assert.equal(h.get("x-svc-method"), "GET");
        assert.equal(h.get("x-svc-namespace"), "app/one");
        assert.equal(h.get("x-svc-repository"), "app");
        assert.equal(h.get("x-svc-reference"), "v1");
        assert.equal(h.get("x-svc-tag"), "v1");
        assert.equal(h.get("x-svc-client-ip"), "127.0.0.1");
        assert.equal(h.get("x-request-team"), "blue", "forward_headers are copied");
        assert.equal(h.get("x-svc-username"), null, "anonymous: no identity headers");
        assert.equal(h.get("x-svc-identity-provider"), "anonymous");

        // CEL refuses first: the webhook is not asked.
        const before = g.calls.length;
        await assertErrorCode(await get(`/v2/cel/blocked/manifests/v1`), 401, "UNAUTHORIZED");
        assert.equal(g.calls.length, before, "CEL refusal does not reach the webhook");

        // 403: denied (anonymous → 401 with a challenge), and remembered for the TTL.
        g.status = 403;
        const denied = await get(`/v2/app/one/manifests/v1`);
        assert.equal(denied.headers.get("www-authenticate")?.startsWith("Basic"), true);
        await assertErrorCode(denied, 401, "UNAUTHORIZED");
        g.status = 200;
        const n = g.calls.length;
        await assertErrorCode(await get(`/v2/app/one/manifests/v1`), 401, "UNAUTHORIZED");
        assert.equal(g.calls.length, n, "the cached denial did not call the webhook");
        // Another request (another reference) is not covered by that denial.
        const other = await get(`/v2/app/one/manifests/${img.digest}`);
        assert.equal(other.status, 200);
        await other.body?.cancel();
        await sleep(2200);
        const after = await get(`/v2/app/one/manifests/v1`);
        assert.equal(after.status, 200, "the denial expired with the TTL");
        await after.body?.cancel();

        // 500: denied, not remembered.
        g.status = 500;
        await assertErrorCode(await get(`/v2/app/one/manifests/v1`), 401, "UNAUTHORIZED");
        g.status = 200;
        const again = await get(`/v2/app/one/manifests/v1`);
        assert.equal(again.status, 200, "an error answer is not cached");
        await again.body?.cancel();

        // A timeout: denied, not remembered, and the request does not hang past timeout_ms.
        g.delayMs = 1500;
        const t0 = performance.now();
        await assertErrorCode(await get(`/v2/app/one/manifests/v1`), 401, "UNAUTHORIZED");
        assert.ok(performance.now() - t0 < 1400, "bounded by timeout_ms");
        g.delayMs = 0;
        const back = await get(`/v2/app/one/manifests/v1`);
        assert.equal(back.status, 200, "a timeout is not cached");
        await back.body?.cancel();

        // Listings are not gated, even while the webhook refuses everything.
        g.status = 403;
        const c0 = g.calls.length;
        for (
          const p of [
            "/v2/_catalog",
            "/v2/app/one/tags/list",
            "/v2/_svc/repositories/list",
            `/v2/app/one/referrers/${img.digest}`,
          ]
        ) {
          const r = await get(p);
          assert.equal(r.status, 200, p);
          await r.body?.cancel();
        }
        assert.equal(g.calls.length, c0, "listings never call the webhook");

        // A repository's own webhook replaces the global one.
        g.status = 200;
        special.status = 403;
        const sp = await req(s, `/v2/special/x/blobs/uploads/`, { method: "POST" });
        await assertErrorCode(sp, 401, "UNAUTHORIZED");
        assert.equal(special.calls.at(-1)?.get("x-svc-action"), "start-upload");
        assert.equal(special.calls.at(-1)?.get("x-svc-namespace"), "special/x");

        const metrics = await (await get("/metrics")).text();
        for (const d of ["allow", "deny", "cached-deny", "error"]) {
          assert.match(
            metrics,
            new RegExp(
              `wharf_authorization_webhook_decisions_total\\{webhook="central",decision="${d}"\\} [1-9]`,
            ),
            d,
          );
        }
        assert.match(
          metrics,
          /wharf_authorization_webhook_duration_seconds_count\{webhook="central"\} [1-9]/,
        );
      });
    } finally {
      await g.stop();
      await special.stop();
    }
  },
);

Deno.test(
  "authorization webhook: an authenticated caller's identity is sent; a refusal is 403 DENIED",
  serverTestOpts,
  async () => {
    const { hashPassword } = await import("../../lib/auth/mod.ts");
    const g = startReceiver();
    try {
      await withServer({
        config: `
[global]
authorization_webhook = "central"

[auth.identity.a1]
username = "alice"
password = "${await hashPassword("pw")}"

[auth.webhook.central]
url = "${g.url}"
`,
      }, async (s) => {
        const auth = { Authorization: `Basic ${btoa("alice:pw")}` };
        g.status = 403;
        await assertErrorCode(
          await req(s, `/v2/team/app/manifests/v1`, { headers: auth }),
          403,
          "DENIED",
        );
        const h = g.calls.at(-1)!;
        assert.equal(h.get("x-svc-username"), "alice");
        assert.equal(h.get("x-svc-identity-id"), "a1");
        // A username is unique within its sign-in method only: the webhook is told which.
        assert.equal(h.get("x-svc-identity-provider"), "basic");
        assert.equal(h.get("x-svc-identity-issuer"), null);
        assert.equal(
          h.get("authorization"),
          null,
          "credentials are forwarded only when configured",
        );
        g.status = 204;
        // The denial is cached per identity: another caller is asked afresh.
        const anon = await req(s, `/v2/team/app/manifests/v1`);
        await assertErrorCode(anon, 404, "MANIFEST_UNKNOWN");
      });
    } finally {
      await g.stop();
    }
  },
);

Deno.test(
  "authorization webhook: a cross-namespace mount asks it for get-blob on the source",
  serverTestOpts,
  async () => {
    const g = startReceiver();
    try {
      await withServer({
        config: `
[global]
authorization_webhook = "central"

[global.access_policy]
default = "allow"

[auth.webhook.central]
url = "${g.url}"
cache_ttl_secs = 0
`,
      }, async (s) => {
        const img = await pushImage(s.url, "vault/src", "v1");
        // The source may be written but not read by this caller: the policies allow both.
        g.decide = (h) =>
          h.get("x-svc-action") === "get-blob" && h.get("x-svc-namespace") === "vault/src"
            ? 403
            : 200;
        const mount = (to: string) =>
          req(s, `/v2/${to}/blobs/uploads/?mount=${img.layer}&from=vault/src`, {
            method: "POST",
          });
        const refused = await mount("open/dst");
        await refused.body?.cancel();
        assert.equal(refused.status, 202, "no mount: an upload session instead (mount rule 2)");
        const asked = g.calls.filter((h) =>
          h.get("x-svc-action") === "get-blob" && h.get("x-svc-namespace") === "vault/src"
        );
        assert.equal(asked.length, 1, "the webhook was asked about the source");
        assert.equal(asked[0].get("x-svc-digest"), img.layer);
        const head = await req(s, `/v2/open/dst/blobs/${img.layer}`, { method: "HEAD" });
        assert.equal(head.status, 404, "the blob was not linked into open/dst");

        g.decide = null;
        const allowed = await mount("open/dst");
        await allowed.body?.cancel();
        assert.equal(allowed.status, 201);
        assert.equal(allowed.headers.get("docker-content-digest"), img.layer);
      });
    } finally {
      await g.stop();
    }
  },
);
