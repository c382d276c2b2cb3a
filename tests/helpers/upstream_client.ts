// A FakeRegistry and an UpstreamClient pointed at it, torn down together, and the assertion
// that an upstream call failed the expected way:
//   await using t = await startUpstream({ auth: … }, { readTimeoutSecs: 0.3 });
//   await assert.rejects(t.client.headBlob("x", d), upstreamError("denied", /still 401/));
import assert from "node:assert/strict";
import type { UpstreamConfig } from "../../lib/config/mod.ts";
import {
  UpstreamClient,
  type UpstreamClientOptions,
  UpstreamError,
  type UpstreamErrorKind,
} from "../../lib/upstream/mod.ts";
import { FakeRegistry, type FakeRegistryOptions } from "./fake_registry.ts";

export interface UpstreamFixture extends AsyncDisposable {
  reg: FakeRegistry;
  client: UpstreamClient;
}

export async function startUpstream(
  options: FakeRegistryOptions = {},
  config: Partial<UpstreamConfig> = {},
  clientOptions: UpstreamClientOptions = {},
): Promise<UpstreamFixture> {
  const reg = await FakeRegistry.start(options);
  const client = new UpstreamClient(reg.upstreamConfig(config), clientOptions);
  return {
    reg,
    client,
    async [Symbol.asyncDispose]() {
      client.close();
      await reg.close();
    },
  };
}

/**
 * A validator for assert.rejects/throws: an UpstreamError of `kind`, its message matching
 * `message`, with these `down`/`retryable` flags when given.
 */
export function upstreamError(
  kind: UpstreamErrorKind,
  message?: RegExp,
  flags?: { down: boolean; retryable: boolean },
): (e: unknown) => true {
  return (e: unknown) => {
    assert.ok(e instanceof UpstreamError, String(e));
    assert.equal(e.kind, kind, e.message);
    if (message) assert.match(e.message, message);
    if (flags) assert.deepEqual({ down: e.down, retryable: e.retryable }, flags, e.message);
    return true;
  };
}
