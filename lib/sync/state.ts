// A sync's KV records (lib/kv/keys.ts, sync/…): the per-repository lease that keeps one
// run at a time across processes (lib/kv's lease), the run in progress (its cursor lets a run cut
// short by a crash resume where it stopped) and the last finished run (status view, schedule).
// The one file of lib/sync that holds the KV: these are the folder's own records.
import { K, Leases, type Taken, UNTIL_FORMAT } from "../kv/mod.ts";

/** Who runs a repository's sync, until when (ms since epoch); renewed while it runs. */
export interface SyncLease {
  holder: string;
  until: number;
}

/** One run of a `[[repository."<name>".sync]]` entry. Bounded: < 16 KiB. */
export interface SyncRunRecord {
  id: string;
  /** the entry's namespaces when the run started (a reordered config does not resume it) */
  namespaces: string[];
  started_at: number;
  finished_at: number | null;
  /** the last namespace and tag done: a resumed run skips what sorts before it */
  cursor: { namespace: string; tag: string } | null;
  tags_fetched: number;
  tags_unchanged: number;
  tags_pruned: number;
  blobs_fetched: number;
  /** bytes of those blobs (absent in records of older versions) */
  bytes_fetched?: number;
  /** "ok", "partial" (some tags failed), "failed" (nothing changed), "rate-limited" */
  outcome: string;
  errors: string[];
  dry_run: boolean;
  /** when the schedule runs it next (ms since epoch): after interval_secs, or a rate limit */
  next_at: number | null;
}

/**
 * A lease not renewed for this long is free: its holder died. Twice the job lease (at least
 * 10 s): a crashed run is taken over about as soon as its job is.
 */
export const syncLeaseMs = (jobLeaseSecs: number) => Math.max(10_000, jobLeaseSecs * 2000);
/** Errors kept in a run record (each cut to MAX_ERROR_CHARS): the record stays small. */
const MAX_ERRORS = 20;
const MAX_ERROR_CHARS = 500;

export class SyncState {
  private readonly leases: Leases<SyncLease>;
  constructor(private readonly kv: Deno.Kv, now = Date.now) {
    this.leases = new Leases(kv, UNTIL_FORMAT, now);
  }

  /**
   * Takes the repository's lease for `holder` for `leaseMs` (its own live one too: a job taken
   * over keeps its id); refused, with the holder, while another live one holds it.
   */
  lease(repository: string, holder: string, leaseMs: number): Promise<Taken<SyncLease>> {
    return this.leases.take(K.syncLease(repository), holder, leaseMs);
  }

  async inProgress(repository: string, n: number): Promise<SyncRunRecord | null> {
    return (await this.kv.get<SyncRunRecord>(K.syncRun(repository, n))).value;
  }

  async last(repository: string, n: number): Promise<SyncRunRecord | null> {
    return (await this.kv.get<SyncRunRecord>(K.syncLast(repository, n))).value;
  }

  /** Records progress (the cursor and counts) of a run in progress. */
  async save(repository: string, n: number, run: SyncRunRecord): Promise<void> {
    await this.kv.set(K.syncRun(repository, n), bounded(run));
  }

  /** The run is over: it becomes the last run and nothing is left to resume. */
  async finish(repository: string, n: number, run: SyncRunRecord): Promise<void> {
    await this.kv.atomic().delete(K.syncRun(repository, n))
      .set(K.syncLast(repository, n), bounded(run)).commit();
  }
}

function bounded(run: SyncRunRecord): SyncRunRecord {
  const errors = run.errors.slice(0, MAX_ERRORS).map((e) =>
    e.length > MAX_ERROR_CHARS ? `${e.slice(0, MAX_ERROR_CHARS)}…` : e
  );
  if (run.errors.length > MAX_ERRORS) {
    errors.push(`… and ${run.errors.length - MAX_ERRORS} more`);
  }
  return { ...run, errors };
}
