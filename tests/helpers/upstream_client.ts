// A FakeRegistry and an UpstreamClient pointed at it, torn down together:
//   await using t = await startUpstream({ auth: … }, { readTimeoutSecs: 0.3 });
import type { UpstreamConfig } from "../../lib/config/mod.ts";
import { UpstreamClient, type UpstreamClientOptions } from "../../lib/upstream/mod.ts";
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
