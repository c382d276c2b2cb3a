import assert from "node:assert/strict";
import { buildConfig } from "./load.ts";

Deno.test("event webhooks, auth webhooks and retention policies: values and defaults", () => {
  const c = buildConfig({
    event_webhook: {
      audit: { url: "https://hooks.example/x", events: ["manifest.push"], token: "t" },
      gate: { url: "http://127.0.0.1:9/", policy: "required", repository_filter: ["a/.*"] },
    },
    auth: {
      webhook: { opa: { url: "http://opa:8181/allow", forward_headers: ["Authorization"] } },
    },
    global: {
      authorization_webhook: "opa",
      retention_policy: { rules: ["top_pushed(5)"], interval_secs: 3600 },
    },
    repository: { team: { authorization_webhook: "opa", retention_policy: { rules: ["true"] } } },
  }, []);
  assert.equal(c.eventWebhooks.length, 2);
  const [audit, gate] = c.eventWebhooks;
  assert.deepEqual(
    { ...audit, repositoryFilter: audit.repositoryFilter.length },
    {
      name: "audit",
      url: "https://hooks.example/x",
      events: ["manifest.push"],
      token: "t",
      timeoutMs: 5000,
      maxRetries: 10,
      repositoryFilter: 0,
      policy: "async",
    },
  );
  assert.equal(gate.policy, "required");
  assert.equal(gate.repositoryFilter[0].test("a/b"), true);
  assert.equal(gate.repositoryFilter[0].test("xa/b"), false, "full match");
  assert.deepEqual(c.auth.webhooks.get("opa"), {
    name: "opa",
    url: "http://opa:8181/allow",
    timeoutMs: 2000,
    forwardHeaders: ["authorization"],
    cacheTtlSecs: 60,
  });
  assert.equal(c.global.authorizationWebhook, "opa");
  assert.deepEqual(c.global.retentionPolicy, {
    rules: ["top_pushed(5)"],
    where: "global.retention_policy",
  });
  assert.deepEqual(c.global.retentionSchedule, { intervalSecs: 3600, dryRun: false });
  assert.equal(c.repositories.get("team")!.authorizationWebhook, "opa");
  assert.equal(
    c.repositories.get("team")!.retentionPolicy!.where,
    'repository."team".retention_policy',
  );
  assert.equal(c.global.jobQueue.concurrency.events, 4);
});

Deno.test("hooks: bad values name their key", () => {
  const bad: [Record<string, unknown>, RegExp][] = [
    [{ event_webhook: { x: { url: "http://h", timeout_ms: 0 } } }, /event_webhook\.x\.timeout_ms/],
    [
      { event_webhook: { x: { url: "http://h", repository_filter: ["("] } } },
      /repository_filter\[0\]: invalid regex/,
    ],
    [
      { event_webhook: { x: { url: "http://u:p@h" } } },
      /event_webhook\.x\.url: must not carry credentials/,
    ],
    [{ event_webhook: { x: { url: "http://h", token: "" } } }, /event_webhook\.x\.token/],
    [
      { event_webhook: { x: { url: "http://h", color: 1 } } },
      /event_webhook\.x\.color: unknown key/,
    ],
    [
      { auth: { webhook: { a: { url: "http://h", forward_headers: ["a b"] } } } },
      /forward_headers\[0\]/,
    ],
    [
      { repository: { r: { authorization_webhook: "zz" } } },
      /repository\."r"\.authorization_webhook/,
    ],
    [
      { repository: { r: { retention_policy: { rules: [], interval_secs: 5 } } } },
      /retention_policy\.interval_secs: unknown key/,
    ],
  ];
  for (const [doc, re] of bad) assert.throws(() => buildConfig(doc, []), re);
});
