// The one optimistic-concurrency loop over Deno KV. Every read-check-commit change in Wharf goes
// through it, so how long attempts go on, the pause between them, the conflict count and the
// answer when they run out are chosen (and measured) in one place instead of in each caller.
//
// A commit that fails a check applied nothing (it is atomic), so an attempt re-reads what it
// depends on and rebuilds its operation from scratch; only the attempt that commits has an effect.
// "database is locked" (another process holding SQLite's write lock) is a different failure,
// retried below this, per commit, by kv_busy.ts.
//
// A conflict means another writer changed a key this write depends on, and each write checks
// only such keys (lib/metadata/manifest_writes.ts), so the loser of a real race retries until it
// wins: not a number of attempts (a busy tag can outlast any count) but for up to
// COMMIT_RETRY_MS. A write that lost every attempt for that long is not refused for contention:
// the KV is taking too long to commit anything, and the answer says so (CommitExhausted).
import { RegistryError } from "../oci/mod.ts";

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
  /**
   * attempts before giving up, for a loop whose conflicts have another meaning than contention
   * (a reclamation under way, a settle that may wait for the next round); default: as many as
   * `withinMs` allows
   */
  attempts?: number;
  /** how long conflicted attempts go on without `attempts` (default COMMIT_RETRY_MS) */
  withinMs?: number;
  /** runs after a conflicted attempt instead of the default jittered pause */
  between?: (attempt: number) => Promise<void>;
  /** the error thrown once every attempt conflicted (default: CommitExhausted) */
  exhausted?: () => Error;
  /** the answer once every attempt conflicted, for a caller that answers it instead of failing */
  otherwise?: () => T;
}

/**
 * How long a write whose commits keep conflicting goes on trying. Racing writers of one key
 * settle in milliseconds (bench/README.md, Contention: 16 clients retagging 3 tags retried 31,567
 * commits in 5 minutes, the slowest push answered in 2.6 s); ten seconds of losing means the KV commits too
 * slowly for its writers, which a client should hear as 503 with Retry-After rather than wait on.
 */
export const COMMIT_RETRY_MS = 10_000;

/**
 * The one answer of a write whose commits conflicted for all of `withinMs`: 503
 * PROVIDER_UNAVAILABLE with Retry-After, saying the metadata store is overloaded. A subclass so
 * a caller with something to undo (an upload session whose bytes moved) can tell it apart.
 */
export class CommitExhausted extends RegistryError {
  constructor(readonly what: string, readonly attempts: number, readonly ms: number) {
    super(
      "PROVIDER_UNAVAILABLE",
      `the metadata store is overloaded: ${what} did not commit in ${(ms / 1000).toFixed(1)} s ` +
        `(${attempts} attempts, each overtaken by another write): retry later`,
      { headers: { "Retry-After": "1" } },
    );
  }
}

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
  const started = performance.now();
  const until = started + (options.withinMs ?? COMMIT_RETRY_MS);
  const more = (n: number) =>
    options.attempts !== undefined ? n < options.attempts : performance.now() < until;
  let n = 0;
  for (;;) {
    const a = await attempt(n);
    if ("done" in a) return a.done;
    const r = await a.op.commit();
    if (r.ok) return "landed" in a ? a.landed(r.versionstamp) : a.value;
    count(what).conflicts++;
    if (!more(++n)) break;
    await (options.between ?? conflictPause)(n - 1);
    if (!more(n)) break;
  }
  count(what).exhausted++;
  if (options.otherwise) return options.otherwise();
  throw options.exhausted?.() ?? new CommitExhausted(what, n, performance.now() - started);
}
