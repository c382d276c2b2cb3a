// The one optimistic-concurrency loop over Deno KV. Every read-check-commit change in Wharf goes
// through it, so the number of attempts, the pause between them and the conflict count are chosen
// (and measured) in one place instead of in each caller.
//
// A commit that fails a check applied nothing (it is atomic), so an attempt re-reads what it
// depends on and rebuilds its operation from scratch; only the attempt that commits has an effect.
// "database is locked" (another process holding SQLite's write lock) is a different failure,
// retried below this, per commit, by kv_busy.ts.

/**
 * What one attempt decided: commit `op` and return `value` if it commits (or `landed(versionstamp)`,
 * for a write that hands its own versionstamp on: a reservation, the revision a many-tag push
 * goes on tagging, a bucket the next settle checks), or stop with `done` without writing.
 */
export type Attempt<T> =
  | { op: Deno.AtomicOperation; value: T }
  | { op: Deno.AtomicOperation; landed: (versionstamp: string) => T }
  | { done: T };

export interface RetryOptions<T> {
  /** attempts before giving up (default 20) */
  attempts?: number;
  /** runs after a conflicted attempt instead of the default jittered pause */
  between?: (attempt: number) => Promise<void>;
  /** the error thrown once every attempt conflicted (default: a plain Error naming `what`) */
  exhausted?: () => Error;
  /** the answer once every attempt conflicted, for a caller that answers it instead of failing */
  otherwise?: () => T;
}

export const DEFAULT_COMMIT_ATTEMPTS = 20;

/** Conflicted attempts and exhausted loops per operation name, for /metrics. */
export interface CommitRetryCounts {
  conflicts: number;
  exhausted: number;
}
const counts = new Map<string, CommitRetryCounts>();

/** A snapshot of the counters (the metrics module renders them as `*_total`). */
export function commitRetryCounts(): ReadonlyMap<string, Readonly<CommitRetryCounts>> {
  return counts;
}

function count(what: string): CommitRetryCounts {
  let c = counts.get(what);
  if (!c) counts.set(what, c = { conflicts: 0, exhausted: 0 });
  return c;
}

/**
 * The pause after conflicted attempt `attempt` (0-based): none after the first conflict (the
 * common case is one racing writer, already finished), then full jitter under a cap that doubles
 * from 1 ms to 32 ms, so writers hammering one key spread out instead of colliding in lockstep.
 */
export function conflictPause(attempt: number): Promise<void> {
  if (attempt === 0) return Promise.resolve();
  const cap = Math.min(32, 2 ** (attempt - 1));
  return new Promise((r) => setTimeout(r, Math.random() * cap));
}

/**
 * Runs `attempt` until its operation commits or it returns `done`. `what` names the operation
 * in metrics and in the default error; keep it a fixed string (not per key).
 */
export async function commitWithRetry<T>(
  what: string,
  attempt: (n: number) => Promise<Attempt<T>>,
  options: RetryOptions<T> = {},
): Promise<T> {
  const attempts = options.attempts ?? DEFAULT_COMMIT_ATTEMPTS;
  for (let n = 0; n < attempts; n++) {
    const a = await attempt(n);
    if ("done" in a) return a.done;
    const r = await a.op.commit();
    if (r.ok) return "landed" in a ? a.landed(r.versionstamp) : a.value;
    count(what).conflicts++;
    if (n + 1 < attempts) await (options.between ?? conflictPause)(n);
  }
  count(what).exhausted++;
  if (options.otherwise) return options.otherwise();
  throw options.exhausted?.() ?? new Error(`${what}: the records it depends on kept changing`);
}
