// How a sandboxed parse ends when it does not end well. Both are permanent for the job queue:
// the same bytes under the same budget trip the same way again.

/** A budget was passed: the job is stopped and fails at once, naming the budget. */
export class BudgetExceededError extends Error {
  override name = "BudgetExceededError";
  readonly permanent = true;
  constructor(
    /** the config key of the budget */
    readonly budget: string,
    readonly limit: number,
    /** what was reached, in words ("2.1 GiB", "31 s") */
    readonly reached: string,
  ) {
    super(`budget ${budget} (${limit}) exceeded: reached ${reached}`);
  }
}

/** The sandbox could not run the parse, or died without a budget to blame. */
export class SandboxError extends Error {
  override name = "SandboxError";
  readonly permanent = true;
}
