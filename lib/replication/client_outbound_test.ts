// Issue 22 §4 for replication: a downstream's redirects are vetted like an upstream's, and a
// refusal is an unreachable downstream (the job retries later), never a request sent there.
import assert from "node:assert/strict";
import { DOWNSTREAM_DEFAULTS, UPSTREAM_DEFAULTS } from "../config/mod.ts";
import { METADATA_TARGETS, startRedirector, startSink } from "../../tests/helpers/outbound.ts";
import { OutboundRefused } from "../http/mod.ts";
import { UpstreamError } from "../upstream/mod.ts";
import { DownstreamClient } from "./client.ts";

function downstream(url: string, outboundAllow?: string[]): DownstreamClient {
  return new DownstreamClient({
    name: "mirror",
    url,
    username: null,
    password: null,
    caBundle: null,
    ...UPSTREAM_DEFAULTS,
    ...DOWNSTREAM_DEFAULTS,
    namespaceFilter: [],
    ...(outboundAllow ? { outboundAllow } : {}),
  });
}

function isRefused(e: unknown): true {
  assert.ok(e instanceof UpstreamError, String(e));
  assert.equal(e.kind, "unreachable", e.message);
  assert.ok(e.retryable);
  assert.match(
    e.message,
    /^downstream mirror \(http:\/\/127\.0\.0\.1:\d+\): .* redirect to .* refused/,
  );
  assert.ok(e.cause instanceof OutboundRefused);
  return true;
}

Deno.test("downstream: redirects to metadata and link-local addresses are refused", async () => {
  await using r = startRedirector(METADATA_TARGETS[0]);
  const c = downstream(r.url);
  try {
    for (const target of METADATA_TARGETS) {
      r.to = target;
      await assert.rejects(c.tags("app"), isRefused, target);
      await assert.rejects(c.hasBlob("app", `sha256:${"0".repeat(64)}`), isRefused, target);
    }
  } finally {
    c.close();
  }
});

Deno.test("downstream: a refused target is never contacted; outbound_allow opens it", async () => {
  await using sink = startSink();
  await using r = startRedirector(`${sink.unspecifiedUrl}/v2/app/tags/list`);
  const c = downstream(r.url);
  const open = downstream(r.url, ["0.0.0.0"]);
  try {
    await assert.rejects(c.tags("app"), isRefused);
    assert.equal(sink.seen.length, 0);
    assert.deepEqual(await open.tags("app"), []);
    assert.equal(sink.seen.length, 1);
  } finally {
    c.close();
    open.close();
  }
});
