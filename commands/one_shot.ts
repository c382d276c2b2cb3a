// The one-shot commands' frame: open the services for a command, run, always close.
import type { Config } from "../lib/config/mod.ts";
import { openServices, type Services } from "../lib/services/mod.ts";
import { BlobStoreOpenError } from "../lib/storage/mod.ts";
import { testCacheHoldMs } from "./test_env.ts";

/** The command's exit code; 2 when the blob store cannot be opened (one line names the setting). */
export async function withServices(
  cfg: Config,
  run: (s: Services) => Promise<number>,
): Promise<number> {
  let services: Services;
  try {
    services = await openServices(cfg, { role: "command", cacheHoldMs: testCacheHoldMs() });
  } catch (e) {
    if (!(e instanceof BlobStoreOpenError)) throw e;
    console.error(`wharf: config ${cfg.sources.join(", ")}: ${e.message}`);
    return 2;
  }
  try {
    return await run(services);
  } finally {
    await services.close();
  }
}
