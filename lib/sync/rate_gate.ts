// Keeps a sync run polite to its upstream (never hammer Docker Hub): an answer of 429 (or a
// 503 with Retry-After) is waited out for as long as it asks, within MAX_WAIT_SECS, then the
// call is made again; an upstream that asks for longer, or keeps refusing, ends the run as
// rate-limited and the next run is scheduled after the wait. A `ratelimit-remaining` the
// upstream announced is a budget of manifest GETs: the run stops when it is spent.
import { isUpstreamError, type UpstreamError } from "../upstream/mod.ts";
import type { RateLimitHint } from "../upstream/mod.ts";

/** The longest single wait a run sits through; longer ones end the run. */
export const MAX_WAIT_SECS = 300;
/** Waits in a row for one call before the run gives up on it. */
const MAX_RETRIES = 5;
/** A 429 without Retry-After waits this long, doubling per retry. */
const DEFAULT_WAIT_SECS = 2;

/** The run must stop: the upstream asked for a long pause or its budget is spent. */
export class RateLimited extends Error {
  constructor(message: string, readonly retryAfterSecs: number) {
    super(message);
  }
}

export function isRateLimitAnswer(e: unknown): e is UpstreamError {
  if (!isUpstreamError(e)) return false;
  return e.status === 429 || (e.status === 503 && e.retryAfterSecs !== undefined);
}

export class RateGate {
  /** manifest GETs left before the upstream's announced limit; null = none announced */
  private budget: number | null = null;
  private resetSecs: number | null = null;
  /** seconds spent waiting on the upstream's request (reported by the run) */
  waitedSecs = 0;

  constructor(
    private readonly signal: AbortSignal,
    private readonly sleep: (ms: number, signal: AbortSignal) => Promise<void> = abortableSleep,
  ) {}

  /** Takes what a tag listing announced. */
  learn(hint: RateLimitHint | null): void {
    if (hint === null) return;
    this.budget = hint.remaining;
    this.resetSecs = hint.resetSecs;
  }

  /** Spends one manifest GET of the budget; throws RateLimited when none is left. */
  spend(): void {
    if (this.budget === null) return;
    if (this.budget <= 0) {
      throw new RateLimited(
        "the upstream's rate limit (ratelimit-remaining) is spent; the rest waits for the next run",
        this.resetSecs ?? 3600,
      );
    }
    this.budget--;
  }

  /** `fn`, again after the upstream's requested wait while it answers 429. */
  async call<T>(fn: () => Promise<T>): Promise<T> {
    for (let attempt = 0;; attempt++) {
      try {
        return await fn();
      } catch (e) {
        if (!isRateLimitAnswer(e)) throw e;
        const wait = e.retryAfterSecs ?? DEFAULT_WAIT_SECS * 2 ** attempt;
        if (wait > MAX_WAIT_SECS || attempt >= MAX_RETRIES) {
          throw new RateLimited(`rate limited by the upstream: ${e.message}`, wait);
        }
        await this.sleep(wait * 1000, this.signal);
        this.waitedSecs += wait;
      }
    }
  }
}

function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal.reason);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}
