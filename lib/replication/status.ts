// The replication status view (GET /v2/_svc/replication/status, issue 24 part 3) and the
// figures the metrics carry: per downstream of each repository, the `replication` queue's
// pending and failed jobs, the lag, and what state.ts recorded of its job runs.
import type { Config, DownstreamConfig } from "../config/mod.ts";
import type { JobQueues } from "../jobs/mod.ts";
import type { DownstreamState } from "./state.ts";

/** Pending and failed jobs counted per status read, each set at most this many. */
export const STATUS_SCAN_CAP = 10_000;
/** A downstream whose oldest pending job is older than this is lagging. */
export const LAGGING_SECS = 300;

export type DownstreamHealth = "ok" | "lagging" | "failing";

export interface DownstreamStatus {
  repository: string;
  name: string;
  url: string;
  mode: string;
  prune: boolean;
  pending: number;
  /** seconds since the oldest pending job was created (the lag); 0 with none pending */
  oldest_pending_secs: number;
  failed: number;
  last_success_at: string | null;
  last_error: { at: string; outcome: string; message: string } | null;
  /** job runs by outcome, across processes, since the KV was created */
  outcomes: {
    pushed: number;
    deleted: number;
    superseded: number;
    skipped: number;
    unsupported: number;
    failed: number;
  };
  supports: { tag_delete: boolean | null; digest_delete: boolean | null };
  health: DownstreamHealth;
}

/** The scheduled pull syncs' rows (lib/sync's syncStatus; routes/replication_status.ts). */
export type SyncStatusSource = () => Promise<object[]>;

export interface ReplicationStatus {
  downstreams: DownstreamStatus[];
  syncs: object[];
  /** pending or failed jobs beyond STATUS_SCAN_CAP were not counted */
  truncated: boolean;
}

const iso = (ms: number | null) => ms === null ? null : new Date(ms).toISOString();

export async function replicationStatus(
  cfg: Config,
  /** what state.ts recorded of each downstream's job runs */
  state: Pick<DownstreamState, "facts">,
  jobs: Pick<JobQueues, "queue">,
  syncs: SyncStatusSource = () => Promise.resolve([]),
): Promise<ReplicationStatus> {
  const q = jobs.queue("replication");
  const now = Date.now();
  const pending = new Map<string, { n: number; oldest: number }>();
  const records = await q.pendingRecords(STATUS_SCAN_CAP);
  for (const r of records) {
    const d = (r.payload as { downstream?: unknown } | null)?.downstream;
    if (typeof d !== "string") continue;
    const p = pending.get(d) ?? { n: 0, oldest: now };
    p.n++;
    p.oldest = Math.min(p.oldest, r.created_at);
    pending.set(d, p);
  }
  const failed = new Map<string, number>();
  let after: string | null = null;
  let seen = 0;
  let truncated = records.length >= STATUS_SCAN_CAP;
  for (;;) {
    const page = await q.listFailed(after, 1000);
    for (const j of page.items) {
      const d = downstreamOfLockKey(j.lock_key);
      if (d !== null) failed.set(d, (failed.get(d) ?? 0) + 1);
    }
    seen += page.items.length;
    if (!page.next) break;
    if (seen >= STATUS_SCAN_CAP) {
      truncated = true;
      break;
    }
    after = page.next;
  }
  const downstreams: DownstreamStatus[] = [];
  for (const rc of cfg.repositories.values()) {
    for (const d of rc.downstreams ?? []) {
      downstreams.push(
        await one(state, rc.name, d, pending.get(d.name), failed.get(d.name) ?? 0, now),
      );
    }
  }
  return { downstreams, syncs: await syncs(), truncated };
}

async function one(
  state: Pick<DownstreamState, "facts">,
  repository: string,
  d: DownstreamConfig,
  pending: { n: number; oldest: number } | undefined,
  failed: number,
  now: number,
): Promise<DownstreamStatus> {
  const f = await state.facts(d.name, d.url);
  const c = (k: string) => f.counts[k] ?? 0;
  const lag = pending ? Math.max(0, (now - pending.oldest) / 1000) : 0;
  // An unsupported delete is the downstream's limit, shown in its count, not a failure.
  const failing = failed > 0 ||
    (f.lastError !== null && f.lastError.outcome === "failed" &&
      f.lastError.at > (f.lastSuccessAt ?? 0));
  return {
    repository,
    name: d.name,
    url: d.url,
    mode: d.mode,
    prune: d.prune,
    pending: pending?.n ?? 0,
    oldest_pending_secs: Math.round(lag * 1000) / 1000,
    failed,
    last_success_at: iso(f.lastSuccessAt),
    last_error: f.lastError && {
      at: new Date(f.lastError.at).toISOString(),
      outcome: f.lastError.outcome,
      message: f.lastError.message,
    },
    outcomes: {
      pushed: c("pushed"),
      deleted: c("deleted"),
      superseded: c("superseded"),
      skipped: c("skipped"),
      unsupported: c("tag-delete-unsupported") + c("delete-unsupported"),
      failed: c("failed"),
    },
    supports: {
      tag_delete: f.caps?.tagDelete ?? null,
      digest_delete: f.caps?.digestDelete ?? null,
    },
    health: failing ? "failing" : lag > LAGGING_SECS ? "lagging" : "ok",
  };
}

/** The downstream a replication job's lock key names (jobs.ts builds them). */
function downstreamOfLockKey(lockKey: string): string | null {
  const m = /^(?:push|delete)\|([^|]+)\|/.exec(lockKey);
  return m ? m[1] : null;
}
