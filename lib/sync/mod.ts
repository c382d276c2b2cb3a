// Scheduled pull sync (issue 24 part 2): pre-warms pull-through repositories with the upstream
// tags their `[[repository."<name>".sync]]` entries select, on the job queues' schedule.
export { type RunResult, SYNC_KIND, Syncer, syncLockKey } from "./syncer.ts";
export { type SyncRecords, type SyncStatus, syncStatus } from "./status.ts";
export { localNamespace, matchesPlatform, matchesTag } from "./select.ts";
export { MAX_WAIT_SECS, RateLimited } from "./rate_gate.ts";
export { syncLeaseMs, SyncState } from "./state.ts";
export type { SyncDeps } from "./deps.ts";
export { formatSyncRun } from "./run_line.ts";
