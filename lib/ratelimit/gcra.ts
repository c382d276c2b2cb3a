// A token bucket as GCRA keeps it: one number, the theoretical arrival time (TAT). A bucket of
// `capacity` tokens refilled one per `periodMs` is full when TAT <= now; taking a token moves
// TAT one period on; a take is refused when that would put TAT more than capacity periods ahead.
// One number per bucket is what lets processes merge their counts with a single max/sum.

export interface Bucket {
  /** one token comes back every periodMs */
  periodMs: number;
  capacity: number;
}

export interface Verdict {
  ok: boolean;
  /** the bucket's TAT after the take (unchanged when refused) */
  tat: number;
  /** tokens left after the take */
  remaining: number;
  /** refused: when the next take would succeed (ms from now) */
  retryAfterMs: number;
}

export function take(b: Bucket, tat: number, now: number): Verdict {
  const base = Math.max(tat, now);
  const next = base + b.periodMs;
  const limit = now + b.capacity * b.periodMs;
  if (next > limit) {
    return { ok: false, tat, remaining: 0, retryAfterMs: next - limit };
  }
  return { ok: true, tat: next, remaining: tokensLeft(b, next, now), retryAfterMs: 0 };
}

/** Whole tokens a bucket at `tat` holds at `now`. */
export function tokensLeft(b: Bucket, tat: number, now: number): number {
  const used = Math.max(tat, now) - now;
  return Math.max(0, Math.floor((b.capacity * b.periodMs - used) / b.periodMs + 1e-9));
}

/**
 * The TAT after merging `taken` local takes into `stored` (what the KV holds, with every other
 * process's takes): charge them on top, but never below what this process saw itself.
 */
export function merge(stored: number, localTat: number, taken: number, periodMs: number): number {
  return Math.max(stored + taken * periodMs, localTat);
}
