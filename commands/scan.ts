// `main.ts scan [--namespace N] [--rescan] [--dry-run] [--quiet|--json]`: queues scans of the
// images without a current report (every image with --rescan), showing its walk's progress
// (commands/progress.ts); the jobs it queues form one batch whose progress the server's Jobs page
// shows. `scan --status` prints the advisory snapshot.
import type { Config } from "../lib/config/mod.ts";
import { formatSnapshot } from "../lib/scan/mod.ts";
import type { Cli } from "./cli.ts";
import { withServices } from "./one_shot.ts";
import { reporterFor } from "./progress.ts";

export function scanCommand(cfg: Config, cli: Cli): Promise<number> {
  const p = reporterFor("scan", cli);
  return withServices(cfg, async ({ reports }) => {
    try {
      if (cli.status) {
        p.summary(formatSnapshot(await reports.status(), cfg));
        return 0;
      }
      const n = await reports.rescanAll({
        namespace: cli.namespace ?? undefined,
        dryRun: cli.dryRun,
        onlyStale: !cli.rescan,
        report: (line) => p.line(`${cli.dryRun ? "would " : ""}${line}`),
        progress: p.sink,
        cause: cli.rescan ? "scan --rescan command" : "scan command",
      });
      p.summary(
        `scan: ${cli.dryRun ? "would queue" : "queued"} ${n} image(s) in ${
          p.elapsedSecs().toFixed(1)
        } s`,
        { queued: n, dry_run: cli.dryRun },
      );
      return 0;
    } finally {
      p.stop();
    }
  });
}
