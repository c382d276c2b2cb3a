// Live config reload (issue 14): the config file is rewritten under a running server and the
// decisions change; a broken file keeps the old config with a log line naming the problem;
// restart-only keys say so; SIGHUP reloads too.
import assert from "node:assert/strict";
import { assertErrorCode, req, serverTestOpts } from "../helpers/api.ts";
import { pushImage, type TestServer, withServer } from "../helpers/server.ts";
import { startReceiver } from "../helpers/webhook_receiver.ts";

const count = (s: TestServer, re: RegExp) => (s.output().match(new RegExp(re, "g")) ?? []).length;

/** Rewrites the config file as `base` + `extra` and waits for the reload's log line. */
async function rewrite(
  s: TestServer,
  base: string,
  extra: string,
  expect: RegExp,
  inPlace = false,
) {
  const before = count(s, expect);
  if (inPlace) await Deno.writeTextFile(s.configPath, base + extra);
  else {
    // Write to a temp file and rename over: what editors and config management do.
    await Deno.writeTextFile(`${s.configPath}.tmp`, base + extra);
    await Deno.rename(`${s.configPath}.tmp`, s.configPath);
  }
  const end = Date.now() + 10_000;
  while (count(s, expect) <= before) {
    if (Date.now() > end) assert.fail(`no ${expect} after rewrite:\n${s.output().slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const RELOADED = /"msg":"config reloaded"/;
const REFUSED = /"msg":"config reload refused; the running config is kept"/;

Deno.test(
  "reload: a policy change applies; a broken file keeps the old config",
  serverTestOpts,
  async () => {
    await withServer({}, async (s) => {
      const base = await Deno.readTextFile(s.configPath);
      await pushImage(s.url, "rl/app", "v1");
      const get = () => req(s, `/v2/rl/app/manifests/v1`);
      const r0 = await get();
      assert.equal(r0.status, 200);
      await r0.body?.cancel();

      const deny = `
[global.access_policy]
default = "allow"
rules = ['request.action == "get-manifest" && request.namespace == "rl/app"']
`;
      await rewrite(s, base, deny, RELOADED);
      await assertErrorCode(await get(), 401, "UNAUTHORIZED");

      // A CEL syntax error: refused, naming the rule; the deny rule stays in force.
      await rewrite(
        s,
        base,
        `[global.access_policy]\ndefault = "allow"\nrules = ['request.action ==']\n`,
        REFUSED,
      );
      assert.match(s.output(), /global\.access_policy\.rules\[0\]/);
      await assertErrorCode(await get(), 401, "UNAUTHORIZED");

      // Invalid TOML and a malformed webhook URL: refused too, naming file or key.
      await rewrite(s, base, `[global\n`, REFUSED);
      assert.match(s.output(), /invalid TOML/);
      await rewrite(s, base, deny + `[event_webhook.x]\nurl = "nope"\n`, REFUSED);
      assert.match(s.output(), /event_webhook\.x\.url: \\"nope\\" is not a valid URL/);
      await assertErrorCode(await get(), 401, "UNAUTHORIZED");

      // Back to allowing.
      await rewrite(s, base, "", RELOADED);
      const r1 = await get();
      assert.equal(r1.status, 200);
      await r1.body?.cancel();
    });
  },
);

Deno.test(
  "reload: identities, repositories and webhooks change; restart-only keys say so",
  serverTestOpts,
  async () => {
    const { hashPassword } = await import("../../lib/auth/mod.ts");
    const rx = startReceiver();
    try {
      await withServer({}, async (s) => {
        const base = await Deno.readTextFile(s.configPath);
        const bob = { Authorization: `Basic ${btoa("bob:pw")}` };
        await assertErrorCode(await req(s, "/v2/", { headers: bob }), 401, "UNAUTHORIZED");
        const extra = `
[auth.identity.b]
username = "bob"
password = "${await hashPassword("pw")}"

[repository.frozen]
immutable_tags = true

[event_webhook.rx]
url = "${rx.url}"
events = ["tag.create"]

[global.job_queue]
poll_interval_ms = 100
`;
        await rewrite(s, base, extra, RELOADED);
        const ok = await req(s, "/v2/", { headers: bob });
        assert.equal(ok.status, 200, "a new identity signs in");
        await ok.body?.cancel();
        assert.match(s.output(), /"key":"global\.job_queue"/, "job_queue needs a restart");

        await pushImage(s.url, "frozen/a", "v1");
        await rx.waitFor((d) => d.length === 1, 10_000, "the new webhook's delivery");
        assert.equal(rx.deliveries[0].event.namespace, "frozen/a");
        // The new repository's immutable tags apply.
        await assert.rejects(() => pushImage(s.url, "frozen/a", "v1"), /409/);

        // A restart-only key: kept, with a log line, and the server stays where it listens.
        const moved = base.replace(/^port = \d+$/m, "port = 1");
        await rewrite(s, moved, extra, RELOADED);
        assert.match(s.output(), /key changed but needs a restart.*"key":"server"/);
        const still = await req(s, "/v2/");
        assert.equal(still.status, 200);
        await still.body?.cancel();
      });
    } finally {
      await rx.stop();
    }
  },
);

Deno.test("reload: SIGHUP reloads without a file change", serverTestOpts, async () => {
  await withServer({}, async (s) => {
    const before = count(s, RELOADED);
    Deno.kill(s.pid, "SIGHUP");
    const end = Date.now() + 10_000;
    while (count(s, RELOADED) === before) {
      if (Date.now() > end) assert.fail(`no reload on SIGHUP:\n${s.output().slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const r = await req(s, "/v2/");
    assert.equal(r.status, 200, "still serving");
    await r.body?.cancel();
  });
});
