// `main.ts sync [--repository R] [--dry-run]`: runs each `[[repository."<name>".sync]]` entry
// once now, under the repository's lease (a scheduled run elsewhere makes it exit 1).
import type { Config } from "../lib/config/mod.ts";
import { formatSyncRun } from "../lib/sync/mod.ts";
import { holderName } from "../lib/services/mod.ts";
import type { Cli } from "./cli.ts";
import { withServices } from "./one_shot.ts";

/** 1: a run failed or another holds its lease; 2: no such sync entry. */
export function syncCommand(cfg: Config, cli: Cli): Promise<number> {
  return withServices(cfg, async ({ syncer }) => {
    const entries = syncer.entries(cli.repository ?? undefined);
    if (entries.length === 0) {
      console.error(
        `wharf: sync: no [[repository."${cli.repository ?? "<name>"}".sync]] entry configured`,
      );
      return 2;
    }
    let code = 0;
    for (const [repo, n] of entries) {
      const r = await syncer.runNow(repo, n, holderName("sync"), {
        dryRun: cli.dryRun,
        report: (line) => console.log(`${repo}#${n}: ${line}`),
      });
      if ("busy" in r) {
        console.error(`wharf: sync ${repo}#${n}: another run holds the lease (${r.busy})`);
        code = 1;
        continue;
      }
      console.log(formatSyncRun(repo, n, r.record));
      if (r.record.outcome !== "ok") code = 1;
    }
    return code;
  });
}
