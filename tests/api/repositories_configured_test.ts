// Configured repositories that hold nothing yet (issue 37 item 3): `GET
// /v2/_svc/repositories/configured` names every configured repository the caller could list tags
// in, held or not, with its settings (and usage when quotas are on), for the UI's Repositories
// page. The repositories listing keeps SPEC's rule: an empty repository is not listed.
import assert from "node:assert/strict";
import { req, serverTestOpts } from "../helpers/api.ts";
import { pushImage, withServer } from "../helpers/server.ts";

const CONFIG = `
[repository."hub"]
namespace = "docker.io"
[[repository."hub".upstream]]
url = "https://registry.invalid"

[repository."team".quota]
max_bytes = 1048576

[repository."secret"]

[global.access_policy]
default = "allow"
rules = ['has(request.repository) && request.repository == "secret"']
`;

Deno.test({
  ...serverTestOpts,
  name:
    "repositories/configured: configured repositories holding nothing are named, hidden ones are not; the listing is unchanged",
  fn: () =>
    withServer({ config: CONFIG }, async (s) => {
      // SPEC's listing: nothing held, nothing listed.
      assert.deepEqual(await (await req(s, "/v2/_svc/repositories/list")).json(), {
        repositories: [],
      });
      const r = await req(s, "/v2/_svc/repositories/configured");
      assert.equal(r.status, 200);
      assert.equal(r.headers.get("content-type"), "application/json");
      const body = await r.json();
      assert.deepEqual(body.repositories.map((x: { name: string }) => x.name), ["hub", "team"]);
      const [hub, team] = body.repositories;
      assert.equal(hub.pull_through_cache, true);
      assert.deepEqual(hub.upstream_urls, ["https://registry.invalid"]);
      assert.equal(team.pull_through_cache, false);
      assert.equal(team.quota_bytes, 1048576);
      assert.equal(team.used_bytes, 0);
      assert.ok(!("namespace_count" in team), "the listing counts namespaces, not this");

      // Once a repository holds an image, both name it.
      await pushImage(s.url, "team/app", "v1");
      const listed = (await (await req(s, "/v2/_svc/repositories/list")).json()).repositories;
      assert.deepEqual(listed.map((x: { name: string }) => x.name), ["team"]);
      const again = (await (await req(s, "/v2/_svc/repositories/configured")).json())
        .repositories;
      assert.deepEqual(again.map((x: { name: string }) => x.name), ["hub", "team"]);
      assert.ok(again[1].used_bytes > 0);

      const head = await req(s, "/v2/_svc/repositories/configured", { method: "HEAD" });
      assert.equal(head.status, 200);
      assert.equal(await head.text(), "");
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "repositories/configured: decided as list-repositories under a default-deny policy",
  fn: () =>
    withServer({
      config:
        `[repository."hub"]\n[[repository."hub".upstream]]\nurl = "https://registry.invalid"\n` +
        `[global.access_policy]\ndefault = "deny"\nrules = []\n`,
    }, async (s) => {
      const r = await req(s, "/v2/_svc/repositories/configured");
      assert.equal(r.status, 401);
      assert.ok(r.headers.get("www-authenticate"));
      assert.doesNotMatch(await r.text(), /hub/);
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "repositories/configured: allowed to list, not to see inside: no repository is named",
  fn: () =>
    withServer({
      config:
        `[repository."hub"]\n[[repository."hub".upstream]]\nurl = "https://registry.invalid"\n` +
        `[global.access_policy]\ndefault = "deny"\n` +
        `rules = ['request.action == "list-repositories"']\n`,
    }, async (s) => {
      const r = await req(s, "/v2/_svc/repositories/configured");
      assert.equal(r.status, 200);
      assert.deepEqual(await r.json(), { repositories: [] });
    }),
});
