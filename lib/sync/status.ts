// The per-sync part of the replication status view (GET /v2/_svc/replication/status, issue 24
// part 3): one row per `[[repository."<name>".sync]]` entry, read from its KV records.
import type { Config } from "../config/mod.ts";
import type { SyncState } from "./state.ts";
import type { Runs, RunView } from "../jobs/mod.ts";

export interface SyncStatus {
  repository: string;
  /** the entry's upstream namespaces */
  namespaces: string[];
  /** RFC 3339 end of the last finished run; null before the first */
  last_run: string | null;
  /** "ok", "partial", "failed" or "rate-limited"; null before the first run */
  last_outcome: string | null;
  /** tags the last run fetched (new or moved) */
  tags_fetched: number;
  /** RFC 3339 time the schedule runs it next; null before the first run (due at startup) */
  next_run: string | null;
  /** the last run's first error; null when it had none */
  last_error: string | null;
  /** a run is in progress (or was cut short and waits to resume) */
  running: boolean;
  /**
   * that run's progress (tags checked of those to check, bytes fetched; lib/jobs/progress.ts);
   * null when none runs
   */
  progress: RunView | null;
}

const iso = (ms: number | null | undefined) =>
  typeof ms === "number" && Number.isFinite(ms) ? new Date(ms).toISOString() : null;

/** What the status view reads: the entries' run records and a run's progress record. */
export interface SyncRecords {
  state: Pick<SyncState, "last" | "inProgress">;
  runs: Pick<Runs, "get">;
}

export async function syncStatus(
  cfg: Config,
  { state, runs }: SyncRecords,
): Promise<SyncStatus[]> {
  const out: SyncStatus[] = [];
  for (const rc of cfg.repositories.values()) {
    for (const [n, sync] of (rc.syncs ?? []).entries()) {
      const [last, current] = await Promise.all([
        state.last(rc.name, n),
        state.inProgress(rc.name, n),
      ]);
      out.push({
        repository: rc.name,
        namespaces: sync.namespaces,
        last_run: iso(last?.finished_at),
        last_outcome: last?.outcome ?? null,
        tags_fetched: last?.tags_fetched ?? 0,
        next_run: iso(last?.next_at),
        last_error: last?.errors[0] ?? null,
        running: current !== null,
        progress: current ? await runs.get("sync", current.id, current.started_at) : null,
      });
    }
  }
  return out;
}
