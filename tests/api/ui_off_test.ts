// The web UI off (issue 37 item 1): any config file without `[ui] enabled = true` turns it off,
// and a browser asking for a UI path (Accept naming text/html) is told so in one sentence, with
// the key that turns it on, instead of a JSON error; API clients keep their OCI errors exactly.
// The answer is decided as `ui-asset`: a default-deny policy refuses it as it refuses the UI.
import assert from "node:assert/strict";
import { assertErrorCode, req, serverTestOpts } from "../helpers/api.ts";
import { type TestServer, withServer } from "../helpers/server.ts";

/** What Chromium sends on a navigation. */
const BROWSER =
  "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8";
const SENTENCE = "The web UI is off: set [ui] enabled = true in Wharf's config file to turn it on.";

/** The page a browser gets for `path` with the UI off. */
async function assertOffPage(s: TestServer, path: string): Promise<void> {
  const r = await req(s, path, { headers: { accept: BROWSER } });
  const body = await r.text();
  assert.equal(r.status, 404, `${path}: ${body}`);
  assert.equal(r.headers.get("content-type"), "text/html; charset=utf-8");
  assert.equal(r.headers.get("cache-control"), "no-store");
  assert.equal(r.headers.get("content-security-policy"), "default-src 'none'");
  assert.equal(r.headers.get("x-content-type-options"), "nosniff");
  assert.equal(r.headers.get("content-length"), String(new TextEncoder().encode(body).length));
  const text = body.replace(/<[^>]+>/g, "").replace("&#39;", "'");
  assert.ok(text.includes(SENTENCE), body);
  assert.match(body, /<code>\[ui\] enabled = true<\/code>/);
  assert.doesNotMatch(body, /<script/i, "the page runs nothing");
}

/** The body an API client gets for a path no route takes (today's, kept exactly). */
async function apiNotFound(s: TestServer, path: string, accept?: string): Promise<string> {
  const r = await req(s, path, accept === undefined ? {} : { headers: { accept } });
  assert.equal(r.headers.get("content-type"), "application/json", `${path} ${accept}`);
  const e = await assertErrorCode(r, 404, "NAME_UNKNOWN");
  return JSON.stringify(e);
}

Deno.test({
  ...serverTestOpts,
  name:
    "ui off: a browser's UI path says the UI is off and which key turns it on; API clients keep their OCI errors",
  fn: () =>
    withServer({}, async (s) => {
      for (const path of ["/", "/app", "/team/web:v1", "/x/y@sha256:abc", "/_jobs/cache"]) {
        await assertOffPage(s, path);
      }
      const head = await req(s, "/", { method: "HEAD", headers: { accept: BROWSER } });
      assert.equal(head.status, 404);
      assert.equal(head.headers.get("content-type"), "text/html; charset=utf-8");
      assert.equal(await head.text(), "");

      // Anything but a browser: the same OCI error as without an Accept header.
      const plain = await apiNotFound(s, "/");
      for (const accept of ["application/json", "*/*", "text/plain", "text/html;q=0", ""]) {
        assert.equal(await apiNotFound(s, "/", accept), plain, accept);
      }
      assert.equal(await apiNotFound(s, "/app", "application/json"), await apiNotFound(s, "/app"));
      // The API and the service paths are never the UI's, whatever the client accepts.
      await assertErrorCode(
        await req(s, "/v2/nothing/here/tags/list", { headers: { accept: BROWSER } }),
        404,
        "NAME_UNKNOWN",
      );
      const v2 = await req(s, "/v2/", { headers: { accept: BROWSER } });
      assert.equal(v2.status, 200);
      assert.equal(await v2.text(), "{}");
      const health = await req(s, "/healthz", { headers: { accept: BROWSER } });
      assert.equal(health.status, 200);
      assert.equal((await health.json()).status, "ok");
      const token = await req(s, "/token", { headers: { accept: BROWSER } });
      assert.notEqual(token.headers.get("content-type"), "text/html; charset=utf-8");
      await token.body?.cancel();
      // Only reads are the UI's.
      await assertErrorCode(
        await req(s, "/app", { method: "POST", headers: { accept: BROWSER } }),
        400,
        "UNSUPPORTED",
      );
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "ui off: decided as ui-asset, so a default-deny policy refuses it and reveals nothing",
  fn: async () => {
    await withServer(
      { config: `[global.access_policy]\ndefault = "deny"\nrules = []\n` },
      async (s) => {
        const r = await req(s, "/", { headers: { accept: BROWSER } });
        assert.ok(r.headers.get("www-authenticate"), "anonymous: the challenge");
        const text = await r.text();
        assert.equal(r.status, 401, text);
        assert.equal(r.headers.get("content-type"), "application/json");
        assert.doesNotMatch(text, /web UI|\[ui\]/, "nothing said about the UI");
        // An API client gets the 404 it gets under any policy: no route, nothing decided.
        await assertErrorCode(await req(s, "/"), 404, "NAME_UNKNOWN");
      },
    );
    await withServer({
      config: `[global.access_policy]\ndefault = "deny"\n` +
        `rules = ['request.action == "ui-asset"']\n`,
    }, async (s) => {
      await assertOffPage(s, "/");
      // allowing the UI's files allows nothing else
      const v2 = await req(s, "/v2/app/tags/list", { headers: { accept: BROWSER } });
      assert.equal(v2.status, 401);
      await v2.body?.cancel();
    });
  },
});

Deno.test({
  ...serverTestOpts,
  name: "ui off: a config reload that turns the UI on is seen at the next request",
  fn: () =>
    withServer({}, async (s) => {
      await assertOffPage(s, "/");
      await Deno.writeTextFile(
        s.configPath,
        `${await Deno.readTextFile(s.configPath)}\n[ui]\nenabled = true\n`,
      );
      Deno.kill(s.pid, "SIGHUP");
      const deadline = Date.now() + 20_000;
      for (;;) {
        const r = await req(s, "/", { headers: { accept: BROWSER } });
        const body = await r.text();
        if (r.status === 200) {
          assert.match(body, /<div id="app">|<script/);
          break;
        }
        assert.ok(Date.now() < deadline, `not reloaded:\n${s.output().slice(-2000)}`);
        await new Promise((res) => setTimeout(res, 100));
      }
    }),
});
