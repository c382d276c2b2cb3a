// One entry for a sandboxed parse, whichever kind runs it (`spec.mode`), and the reading of the
// child's one JSON line.
import { BudgetExceededError, SandboxError } from "./errors.ts";
import type { ChildLine } from "./child.ts";
import { runInProcess, type SandboxSpec } from "./process.ts";
import { runInWorker } from "./worker.ts";

/** Runs the child to its end and returns its output (a process's stdout, a worker's line). */
export function runSandboxed(spec: SandboxSpec): Promise<string> {
  return spec.mode === "worker" ? runInWorker(spec) : runInProcess(spec);
}

/** A job error the child named (the data's fault, or a budget it counts itself). */
export class ChildError extends Error {
  override name = "ChildError";
  constructor(message: string, readonly permanent: boolean) {
    super(message);
  }
}

/**
 * A verdict on the input rather than a fault of this side: a budget passed, the sandbox died of
 * its input, or the child named an error. The same bytes would end the same way, so a caller
 * records the outcome instead of failing (and retrying) its job. A SandboxUnavailableError (no
 * sandbox could start, a signal from elsewhere) is never one: it is thrown on, and retried.
 */
export function isSandboxVerdict(
  e: unknown,
): e is BudgetExceededError | SandboxError | ChildError {
  return e instanceof BudgetExceededError || e instanceof SandboxError || e instanceof ChildError;
}

/** Runs a child written with `childMain` and returns its result. */
export async function runSandboxedJson<T>(spec: SandboxSpec): Promise<T> {
  const text = await runSandboxed(spec);
  let line: ChildLine;
  try {
    line = JSON.parse(text.slice(text.lastIndexOf("\n", text.length - 2) + 1));
  } catch {
    throw new SandboxError(`${spec.label} sandbox printed no result`);
  }
  if ("ok" in line) return line.ok as T;
  if (line.budget !== undefined) {
    throw new BudgetExceededError(line.budget, line.limit ?? 0, line.reached ?? "");
  }
  throw new ChildError(line.error, line.permanent === true);
}
