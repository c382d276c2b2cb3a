// `main.ts prune [--dry-run] [--now T] [--quiet|--json]`: deletes the tags no retention rule keeps
// (and the manifests left untagged) through the normal delete path; their events are queued like
// any delete's. Shows the namespaces walked of all there are (commands/progress.ts). Refuses to
// start when a rule reads pull times that are not recorded.
import type { Config } from "../lib/config/mod.ts";
import { PolicyCompileError } from "../lib/policy/mod.ts";
import {
  compileRetention,
  formatPrune,
  prune,
  pullTimesWithoutRecording,
  RetentionCompileError,
} from "../lib/retention/mod.ts";
import { auditedRun } from "../lib/audit/mod.ts";
import type { Cli } from "./cli.ts";
import { validated } from "./validate.ts";
import { withServices } from "./one_shot.ts";
import { reporterFor } from "./progress.ts";

/** 1: some deletes failed; 2: the config or the rules cannot be pruned with. */
export async function pruneCommand(cfg: Config, cli: Cli): Promise<number> {
  let rules;
  try {
    validated(cfg);
    rules = compileRetention(cfg);
  } catch (e) {
    if (!(e instanceof RetentionCompileError) && !(e instanceof PolicyCompileError)) throw e;
    console.error(`wharf: config ${cfg.sources.join(", ")}: ${e.message}`);
    return 2;
  }
  const key = pullTimesWithoutRecording(cfg, rules);
  if (key) {
    console.error(
      `wharf: prune: ${key} reads pull times (image.last_pulled_at, top_pulled) but global.update_pull_time is off, so none are recorded; turn it on or change the rules`,
    );
    return 2;
  }
  if (rules.size === 0) {
    console.error("wharf: prune: no [global.retention_policy] or repository retention_policy");
    return 2;
  }
  const p = reporterFor("prune", cli);
  return await withServices(cfg, async ({ kv, registry }) => {
    try {
      const pruneDeps = { kv, manifests: registry.manifests };
      const s = await auditedRun(registry.events.audit, "prune.run", () =>
        prune(cfg, pruneDeps, {
          dryRun: cli.dryRun,
          now: cli.now ?? undefined,
          report: (line) => p.line(`${cli.dryRun ? "would " : ""}${line}`),
          progress: p.sink,
        }), (s) => formatPrune(s, cli.dryRun));
      p.summary(formatPrune(s, cli.dryRun), { ...s, dry_run: cli.dryRun });
      return s.failures > 0 ? 1 : 0;
    } finally {
      p.stop();
    }
  });
}
