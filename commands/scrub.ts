// `main.ts scrub [--dry-run]`: one pass against the configured stores, safe while servers run.
import type { Config } from "../lib/config/mod.ts";
import { formatSummary } from "../lib/registry/mod.ts";
import { scrubberFor } from "../lib/services/mod.ts";
import type { Cli } from "./cli.ts";
import { withServices } from "./one_shot.ts";

/** 1: another scrub holds the lease. */
export function scrubCommand(cfg: Config, cli: Cli): Promise<number> {
  return withServices(cfg, async (services) => {
    const s = await scrubberFor(services).run({ dryRun: cli.dryRun });
    if (!s) {
      console.error("wharf: another scrub holds the lease; try again later");
      return 1;
    }
    console.log(formatSummary(s));
    return 0;
  });
}
