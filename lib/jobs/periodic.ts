// The one in-process timer for work that repeats (scheduled scrub, prune and reconcile, the
// advisory directory check). Durable work still goes through job records; this only decides when
// a process looks again.
import { log } from "../log.ts";

export interface PeriodicOptions {
  /** stops the timer; a run in progress sees it too (it is passed to `run`) */
  signal?: AbortSignal;
  /** each pause is everyMs × (1 ± jitter × random), so processes started together drift apart */
  jitter?: number;
  /** also run once at once, not only after the first pause */
  immediate?: boolean;
  /** the timer alone does not keep the process alive */
  unref?: boolean;
}

/**
 * Runs `run` every `everyMs` until `signal` aborts (or the returned stop is called). A tick that
 * finds the previous run still going is skipped rather than queued: a slow scrub never stacks
 * up behind itself. A failure is logged as "<name> failed" (and nothing after the abort, which
 * usually caused it); the next tick runs anyway.
 */
export function periodic(
  name: string,
  everyMs: number,
  run: (signal: AbortSignal) => Promise<unknown>,
  opts: PeriodicOptions = {},
): () => void {
  const ac = new AbortController();
  const signal = opts.signal ? AbortSignal.any([opts.signal, ac.signal]) : ac.signal;
  const jitter = Math.min(Math.max(opts.jitter ?? 0, 0), 1);
  let running = false;
  let timer: ReturnType<typeof setTimeout> | undefined;

  const tick = async () => {
    if (running || signal.aborted) return;
    running = true;
    try {
      await run(signal);
    } catch (e) {
      if (!signal.aborted) log.error(`${name} failed`, { error: errorText(e) });
    } finally {
      running = false;
    }
  };
  const next = () => {
    if (signal.aborted) return;
    const pause = everyMs * (1 + jitter * (2 * Math.random() - 1));
    timer = setTimeout(() => {
      next();
      void tick();
    }, pause);
    if (opts.unref) Deno.unrefTimer(timer as unknown as number);
  };
  const stop = () => {
    clearTimeout(timer);
    ac.abort();
  };

  if (signal.aborted) return stop;
  signal.addEventListener("abort", () => clearTimeout(timer), { once: true });
  if (opts.immediate) void tick();
  next();
  return stop;
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
