// A sync's KV records (lib/kv/keys.ts, sync/…): the per-repository lease that keeps one
// run at a time across processes, the run in progress (its cursor lets a run cut short by a
// crash resume where it stopped) and the last finished run (status view, schedule).
import { K, type SyncLease, type SyncRunRecord } from "../kv/mod.ts";

/**
 * A lease not renewed for this long is free: its holder died. Twice the job lease (at least
 * 10 s): a crashed run is taken over about as soon as its job is.
 */
export const syncLeaseMs = (jobLeaseSecs: number) => Math.max(10_000, jobLeaseSecs * 2000);
/** Errors kept in a run record (each cut to MAX_ERROR_CHARS): the record stays small. */
const MAX_ERRORS = 20;
const MAX_ERROR_CHARS = 500;

export class SyncState {
  constructor(
    private readonly kv: Deno.Kv,
    readonly leaseMs = syncLeaseMs(30),
    private readonly now = Date.now,
  ) {}

  /** Takes (or renews) the repository's lease for `holder`; false when another live one holds it. */
  async lease(repository: string, holder: string): Promise<boolean> {
    const key = K.syncLease(repository);
    const e = await this.kv.get<SyncLease>(key);
    if (e.value && e.value.holder !== holder && e.value.until > this.now()) return false;
    const r = await this.kv.atomic().check(e)
      .set(key, { holder, until: this.now() + this.leaseMs } satisfies SyncLease).commit();
    return r.ok;
  }

  async release(repository: string, holder: string): Promise<void> {
    const key = K.syncLease(repository);
    const e = await this.kv.get<SyncLease>(key);
    if (e.value?.holder === holder) await this.kv.atomic().check(e).delete(key).commit();
  }

  /** Who holds the lease now (null: nobody live). */
  async holder(repository: string): Promise<string | null> {
    const e = await this.kv.get<SyncLease>(K.syncLease(repository));
    return e.value && e.value.until > this.now() ? e.value.holder : null;
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
