// `main.ts reindex [--dry-run] [--force]`: queues layers without a current index.
import type { Config } from "../lib/config/mod.ts";
import type { Cli } from "./cli.ts";
import { withServices } from "./one_shot.ts";

export function reindexCommand(cfg: Config, cli: Cli): Promise<number> {
  const { dryRun, force } = cli;
  return withServices(cfg, async ({ layers }) => {
    const r = await layers.reindex({
      dryRun,
      force,
      report: (line) => console.log(`${dryRun ? "would " : ""}${line}`),
    });
    console.log(`reindex: ${r.layers} layer(s); ${dryRun ? "would queue" : "queued"} ${r.queued}`);
    return 0;
  });
}
