// `main.ts scrub [--dry-run] [--quiet|--json]`: one pass against the configured stores, safe while
// servers run, showing each phase's progress (commands/progress.ts).
import type { Config } from "../lib/config/mod.ts";
import { formatSummary } from "../lib/registry/mod.ts";
import { scrubberFor } from "../lib/services/mod.ts";
import type { Cli } from "./cli.ts";
import { withServices } from "./one_shot.ts";
import { reporterFor } from "./progress.ts";

/** 1: another scrub holds the lease. */
export function scrubCommand(cfg: Config, cli: Cli): Promise<number> {
  const p = reporterFor("scrub", cli);
  return withServices(cfg, async (services) => {
    try {
      const s = await scrubberFor(services).run({ dryRun: cli.dryRun, progress: p.sink });
      if (!s) {
        p.error("wharf: another scrub holds the lease; try again later");
        return 1;
      }
      p.summary(formatSummary(s), { ...s });
      return 0;
    } finally {
      p.stop();
    }
  });
}
