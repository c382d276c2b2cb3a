// `main.ts replicate [--dry-run]`: one reconcile pass over every downstream; jobs do the work.
import type { Config } from "../lib/config/mod.ts";
import type { ReconcileSummary } from "../lib/replication/mod.ts";
import type { Cli } from "./cli.ts";
import { withServices } from "./one_shot.ts";

/** 1: a downstream could not be reconciled. */
export function replicateCommand(cfg: Config, cli: Cli): Promise<number> {
  const { dryRun } = cli;
  return withServices(cfg, async ({ replicator }) => {
    const s = await replicator.reconcile(cfg, {
      dryRun,
      report: (line) => console.log(`${dryRun ? "would " : ""}${line}`),
    });
    console.log(formatReconcile(s, dryRun));
    return Object.keys(s.errors).length ? 1 : 0;
  });
}

function formatReconcile(s: ReconcileSummary, dryRun: boolean): string {
  const verb = dryRun ? "would enqueue" : "enqueued";
  const errors = Object.entries(s.errors).map(([d, e]) => `\n  ${d}: ${e}`).join("");
  return `reconcile: ${s.namespaces} namespace(s), ${s.tags} tag(s); ${verb} ${s.pushes} push(es) and ${s.deletes} delete(s)${
    errors ? `; errors:${errors}` : ""
  }`;
}
