// `main.ts sync [--repository R] [--dry-run] [--quiet|--json]`: runs each
// `[[repository."<name>".sync]]` entry once now, under the repository's lease (a scheduled run
// elsewhere makes it exit 1), showing tags checked of those to check and bytes fetched
// (commands/progress.ts); each entry's line as it ends, then one summary line.
import type { Config } from "../lib/config/mod.ts";
import { formatSyncRun } from "../lib/sync/mod.ts";
import { holderName } from "../lib/services/mod.ts";
import type { Cli } from "./cli.ts";
import { withServices } from "./one_shot.ts";
import { bytesText, reporterFor } from "./progress.ts";

/** 1: a run failed or another holds its lease; 2: no such sync entry. */
export function syncCommand(cfg: Config, cli: Cli): Promise<number> {
  const p = reporterFor("sync", cli);
  return withServices(cfg, async ({ syncer }) => {
    const entries = syncer.entries(cli.repository ?? undefined);
    if (entries.length === 0) {
      p.error(
        `wharf: sync: no [[repository."${cli.repository ?? "<name>"}".sync]] entry configured`,
      );
      return 2;
    }
    let code = 0;
    const totals = { runs: 0, failed: 0, busy: 0, tags_fetched: 0, blobs_fetched: 0, bytes: 0 };
    try {
      for (const [repo, n] of entries) {
        const phase = `${repo}#${n}`;
        const t0 = p.elapsedSecs();
        const r = await syncer.runNow(repo, n, holderName("sync"), {
          dryRun: cli.dryRun,
          report: (line) => p.line(`${phase}: ${line}`),
          progress: (u) => p.sink({ ...u, phase }),
        });
        if ("busy" in r) {
          p.error(`wharf: sync ${phase}: another run holds the lease (${r.busy})`);
          totals.busy++;
          code = 1;
          continue;
        }
        const rec = r.record;
        totals.runs++;
        totals.tags_fetched += rec.tags_fetched;
        totals.blobs_fetched += rec.blobs_fetched;
        totals.bytes += rec.bytes_fetched ?? 0;
        p.result(formatSyncRun(repo, n, rec, p.elapsedSecs() - t0), {
          repository: repo,
          sync: n,
          ...rec,
        });
        if (rec.outcome !== "ok") {
          totals.failed++;
          code = 1;
        }
      }
      p.summary(
        `sync: ${totals.runs} run(s), ${totals.failed} not ok${
          totals.busy ? `, ${totals.busy} held elsewhere` : ""
        }; ${
          cli.dryRun ? "would fetch" : "fetched"
        } ${totals.tags_fetched} tag(s), ${totals.blobs_fetched} blob(s) (${
          bytesText(totals.bytes)
        }) in ${p.elapsedSecs().toFixed(1)} s`,
        { ...totals, dry_run: cli.dryRun },
      );
      return code;
    } finally {
      p.stop();
    }
  });
}
