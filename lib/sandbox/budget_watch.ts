// The budgets of one sandboxed run, watched the same way whichever kind runs it (process.ts,
// worker.ts): the wall clock from the start, the job's abort, a poll of what the runner can
// measure (a process's CPU time and resident memory, a worker thread's CPU time), and the output
// and memory the runner hears of itself. The first budget passed is kept, and the run is stopped.
import type { SandboxBudget } from "../config/mod.ts";
import { BudgetExceededError } from "./errors.ts";

/** The budgets a run is held to, by their config key ("output": the result's size). */
export type BudgetKey = "max_wall_secs" | "max_cpu_secs" | "max_memory_bytes" | "output";

/** A budget a poll found passed, and what was reached, in words ("31 s", "2148532224 bytes"). */
export interface Passed {
  budget: BudgetKey;
  reached: string;
}

export interface BudgetWatchOptions {
  budget: SandboxBudget;
  /** the output budget, in bytes */
  maxOutputBytes: number;
  signal?: AbortSignal;
  /** stops the run: a budget was passed (its error), or the job was aborted (null) */
  stop: (why: BudgetExceededError | null) => void;
}

export class BudgetWatch {
  #passed: BudgetExceededError | null = null;
  #wall: ReturnType<typeof setTimeout> | undefined;
  #poll: ReturnType<typeof setInterval> | undefined;
  readonly #onAbort = () => this.o.stop(null);

  constructor(private readonly o: BudgetWatchOptions) {}

  /**
   * Starts the clock and listens for the job's abort; with `poll`, `check` runs every `everyMs`
   * (one at a time, and no more once a budget was passed).
   */
  start(poll?: { everyMs: number; check: () => Promise<Passed | null> }): void {
    const { budget } = this.o;
    this.#wall = setTimeout(
      () => this.trip("max_wall_secs", `${budget.wallSecs} s`),
      budget.wallSecs * 1000,
    );
    this.o.signal?.addEventListener("abort", this.#onAbort);
    let polling = false;
    this.#poll = poll
      ? setInterval(async () => {
        if (polling || this.#passed) return;
        polling = true;
        try {
          const p = await poll.check();
          if (p) this.trip(p.budget, p.reached);
        } catch {
          // finds nothing: a run whose measure failed has ended (its exit says why)
        } finally {
          polling = false;
        }
      }, poll.everyMs)
      : undefined;
  }

  /** The first budget passed, if any. */
  get passed(): BudgetExceededError | null {
    return this.#passed;
  }

  /** `budget` was passed, `reached` says how far: the run is stopped. */
  trip(budget: BudgetKey, reached: string): void {
    const e = new BudgetExceededError(budget, this.limit(budget), reached);
    this.#passed ??= e;
    this.o.stop(e);
  }

  /** The run is over: the clock, the poll and the abort listener go. */
  end(): void {
    clearTimeout(this.#wall);
    if (this.#poll !== undefined) clearInterval(this.#poll);
    this.o.signal?.removeEventListener("abort", this.#onAbort);
  }

  private limit(budget: BudgetKey): number {
    const b = this.o.budget;
    return budget === "max_wall_secs"
      ? b.wallSecs
      : budget === "max_cpu_secs"
      ? b.cpuSecs
      : budget === "max_memory_bytes"
      ? b.memoryBytes
      : this.o.maxOutputBytes;
  }
}
