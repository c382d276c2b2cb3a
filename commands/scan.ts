// `main.ts scan [--namespace N] [--rescan] [--dry-run]`: queues scans of the images without a
// current report (every image with --rescan); `scan --status` prints the advisory snapshot.
import type { Config } from "../lib/config/mod.ts";
import { formatSnapshot } from "../lib/scan/mod.ts";
import type { Cli } from "./cli.ts";
import { withServices } from "./one_shot.ts";

export function scanCommand(cfg: Config, cli: Cli): Promise<number> {
  return withServices(cfg, async ({ reports }) => {
    if (cli.status) {
      console.log(formatSnapshot(await reports.status(), cfg));
      return 0;
    }
    const n = await reports.rescanAll({
      namespace: cli.namespace ?? undefined,
      dryRun: cli.dryRun,
      onlyStale: !cli.rescan,
      report: (line) => console.log(`${cli.dryRun ? "would " : ""}${line}`),
    });
    console.log(`scan: ${cli.dryRun ? "would queue" : "queued"} ${n} image(s)`);
    return 0;
  });
}
