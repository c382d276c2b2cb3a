// Scheduled pull sync (issue 24 part 2): pre-warms pull-through repositories with the upstream
// tags their `[[repository."<name>".sync]]` entries select, on the job queues' schedule.
export { type RunResult, SYNC_KIND, Syncer, syncLockKey } from "./syncer.ts";
export { type SyncStatus, syncStatus } from "./status.ts";
export { localNamespace, matchesPlatform, matchesTag } from "./select.ts";
export { MAX_WAIT_SECS, RateLimited } from "./rate_gate.ts";
export { syncLeaseMs } from "./state.ts";

import type { SyncRunRecord } from "../metadata/mod.ts";

/** One line per finished run, as `main.ts sync` prints it. */
export function formatSyncRun(repository: string, n: number, r: SyncRunRecord): string {
  const verb = r.dry_run ? "would fetch" : "fetched";
  return `sync ${repository}#${n} (${
    r.namespaces.join(", ")
  }): ${r.outcome}; ${verb} ${r.tags_fetched} tag(s), ${r.tags_unchanged} unchanged, ${r.tags_pruned} pruned, ${r.blobs_fetched} blob(s) fetched${
    r.errors.length ? `; errors:\n  ${r.errors.join("\n  ")}` : ""
  }`;
}
