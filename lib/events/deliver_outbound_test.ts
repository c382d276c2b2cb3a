// Issue 22 §4 for event webhooks: a delivery never follows a redirect; when the redirect
// pointed at an address the outbound guard refuses, the failed delivery says so.
import assert from "node:assert/strict";
import type { EventWebhookConfig } from "../config/mod.ts";
import { METADATA_TARGETS, startRedirector, startSink } from "../../tests/helpers/outbound.ts";
import { deliver, DeliveryError } from "./deliver.ts";

function hook(url: string): EventWebhookConfig {
  return {
    name: "ops",
    url,
    events: [],
    token: "t",
    timeoutMs: 2000,
    maxRetries: 0,
    repositoryFilter: [],
    policy: "async",
  };
}

const send = (url: string) =>
  deliver(hook(url), '{"kind":"manifest.push"}', "id-1", "manifest.push");

Deno.test("webhook: a redirect to a metadata address fails the delivery, naming it", async () => {
  await using r = startRedirector(METADATA_TARGETS[0]);
  const expected: Record<string, RegExp> = {
    [METADATA_TARGETS[0]]: /169\.254\.169\.254 is a cloud metadata address/,
    [METADATA_TARGETS[1]]: /fd00:ec2::254 is a cloud metadata address/,
    [METADATA_TARGETS[2]]:
      /http:\/\/169\.254\.169\.254\/latest\/meta-data\/, refused: 169\.254\.169\.254 is/,
  };
  for (const target of METADATA_TARGETS) {
    r.to = target;
    await assert.rejects(send(`${r.url}/hook`), (e: unknown) => {
      assert.ok(e instanceof DeliveryError, String(e));
      assert.equal(e.status, 307);
      assert.match(e.message, /^webhook ops answered 307: a redirect to .*, refused: /, target);
      if (expected[target]) assert.match(e.message, expected[target]);
      return true;
    });
  }
});

Deno.test("webhook: no redirect is followed, refused or not", async () => {
  await using sink = startSink();
  await using r = startRedirector(`${sink.unspecifiedUrl}/in`, 308);
  await assert.rejects(
    send(r.url),
    /answered 308: a redirect to http:\/\/0\.0\.0\.0:\d+\/in, refused/,
  );
  r.to = `http://localhost:${sink.port}/in?sig=x`;
  await assert.rejects(
    send(r.url),
    /webhook ops answered 308 \(a redirect to http:\/\/localhost:\d+\/in, not followed\)$/,
  );
  assert.equal(sink.seen.length, 0);
  assert.equal(r.seen.length, 2);
});
