// SPEC §Endpoints: API version check, and §Health and metrics (liveness and readiness probes).
import assert from "node:assert/strict";
import { req, serverTestOpts } from "../helpers/api.ts";
import { withServer } from "../helpers/server.ts";

Deno.test({
  name: "api version check and probes",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      await t.step("GET /v2/ answers 200", async () => {
        const r = await req(s, "/v2/");
        assert.equal(r.status, 200);
        await r.body?.cancel();
      });

      await t.step("HEAD /v2/ answers 200 with no body", async () => {
        const r = await req(s, "/v2/", { method: "HEAD" });
        assert.equal(r.status, 200);
        assert.equal((await r.arrayBuffer()).byteLength, 0);
      });

      await t.step("GET /healthz answers 200 while the process runs", async () => {
        const r = await req(s, "/healthz");
        assert.equal(r.status, 200);
        await r.body?.cancel();
      });

      await t.step("GET /readyz answers 200 {status: ready} with no error", async () => {
        const r = await req(s, "/readyz");
        assert.equal(r.status, 200);
        assert.match(r.headers.get("content-type") ?? "", /^application\/json/);
        const body = await r.json();
        assert.equal(body.status, "ready");
        assert.equal(body.error, undefined);
      });
    }),
});
