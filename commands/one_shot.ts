// The one-shot commands' frame: open the services for a command, run, always close.
import type { Config } from "../lib/config/mod.ts";
import { openServices, type Services } from "../lib/services/mod.ts";

export async function withServices<T>(cfg: Config, run: (s: Services) => Promise<T>): Promise<T> {
  const services = await openServices(cfg, { role: "command" });
  try {
    return await run(services);
  } finally {
    await services.close();
  }
}
