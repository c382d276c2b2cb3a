// `main.ts reindex [--namespace N] [--dry-run] [--force] [--quiet|--json]`: queues the layers
// without a current index, showing its walk's progress (commands/progress.ts); the jobs it queues
// form one batch whose progress the server's Jobs page shows.
import type { Config } from "../lib/config/mod.ts";
import { isValidName } from "../lib/oci/mod.ts";
import type { Cli } from "./cli.ts";
import { withServices } from "./one_shot.ts";
import { reporterFor } from "./progress.ts";

/** 2: a bad argument. */
export function reindexCommand(cfg: Config, cli: Cli): Promise<number> {
  const { dryRun, force } = cli;
  if (cli.namespace !== null && !isValidName(cli.namespace)) {
    console.error(`wharf: reindex: --namespace ${cli.namespace} is not a repository name`);
    return Promise.resolve(2);
  }
  const p = reporterFor("reindex", cli);
  return withServices(cfg, async ({ layers }) => {
    try {
      const r = await layers.reindex({
        dryRun,
        force,
        namespace: cli.namespace ?? undefined,
        report: (line) => p.line(`${dryRun ? "would " : ""}${line}`),
        progress: p.sink,
      });
      p.summary(
        `reindex: ${r.namespaces} namespace(s), ${r.layers} layer(s) in ${
          p.elapsedSecs().toFixed(1)
        } s; ${dryRun ? "would queue" : "queued"} ${r.queued}`,
        { ...r, dry_run: dryRun },
      );
      return 0;
    } finally {
      p.stop();
    }
  });
}
