// How a sandboxed parse ends when it does not end well. A budget passed and a child that died of
// its input are verdicts about the input, permanent for the job queue: the same bytes under the
// same budget trip the same way again. A sandbox that could not run at all is the machine's
// fault, never a verdict: the job retries, and nothing is recorded about the input.

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

/**
 * The machine, not the input: no sandbox could be started (no permission to start the runtime,
 * no runtime, no worker), or the child was ended by a signal this side did not send (the kernel's
 * OOM killer, a shutdown). Another attempt may well succeed, so a caller retries (a job backs
 * off) and records nothing about the input (docs/design.md, "As shipped").
 */
export class SandboxUnavailableError extends Error {
  override name = "SandboxUnavailableError";
  readonly permanent = false;
  /** read by lib/jobs and the API: a broken machine, answered 503 and retried */
  readonly machine = true;
}
