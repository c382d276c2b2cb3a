// GET /v2/_svc/replication/status without downstreams (empty lists), its methods and query, and
// its CEL action `replication-status`: granted alone under default-deny, refused alone under
// default-allow.
import assert from "node:assert/strict";
import { assertError, req, serverTestOpts } from "../helpers/api.ts";
import { withServer } from "../helpers/server.ts";

Deno.test({
  ...serverTestOpts,
  name: "replication status: empty without downstreams; HEAD, other methods and queries",
  fn: () =>
    withServer({}, async (s) => {
      const r = await req(s, "/v2/_svc/replication/status");
      assert.equal(r.status, 200);
      assert.equal(r.headers.get("content-type"), "application/json");
      assert.deepEqual(await r.json(), { downstreams: [], syncs: [], truncated: false });
      const h = await req(s, "/v2/_svc/replication/status", { method: "HEAD" });
      assert.equal(h.status, 200);
      assert.equal(await h.text(), "");
      await assertError(
        await req(s, "/v2/_svc/replication/status", { method: "POST" }),
        400,
        "UNSUPPORTED",
      );
      await assertError(await req(s, "/v2/_svc/replication/status?x=1"), 404, "NAME_UNKNOWN");
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "replication status: the CEL action replication-status grants and refuses it",
  fn: async () => {
    const only = `
[global.access_policy]
default = "deny"
rules = ['request.action == "replication-status"']
`;
    await withServer({ config: only }, async (s) => {
      const r = await req(s, "/v2/_svc/replication/status");
      assert.equal(r.status, 200);
      await r.body?.cancel();
      const jobs = await req(s, "/v2/_svc/jobs/list?queue=replication");
      assert.equal(jobs.status, 401);
      await jobs.body?.cancel();
    });
    const refused = `
[global.access_policy]
default = "allow"
rules = ['request.action == "replication-status"']
`;
    await withServer({ config: refused }, async (s) => {
      const r = await req(s, "/v2/_svc/replication/status");
      assert.equal(r.status, 401);
      assert.ok(r.headers.get("www-authenticate"));
      await r.body?.cancel();
      const jobs = await req(s, "/v2/_svc/jobs/list?queue=replication");
      assert.equal(jobs.status, 200);
      await jobs.body?.cancel();
    });
  },
});
