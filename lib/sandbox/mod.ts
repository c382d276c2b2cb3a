// Untrusted content is parsed here: child processes with budgets, or workers where there are no
// subprocesses (docs/design.md).
export { BudgetExceededError, SandboxError, SandboxUnavailableError } from "./errors.ts";
export { processUsage, type SandboxSpec } from "./process.ts";
export { ChildError, isSandboxVerdict, runSandboxed, runSandboxedJson } from "./run.ts";
export { childArgs, childInput, childMain } from "./child.ts";
export {
  childExecutable,
  launchStyle,
  PERMISSION_SET,
  processSandboxProblem,
  SANDBOX_ENTRY,
} from "./launch.ts";
export { sandboxChild } from "./entry.ts";
export { probeSandbox } from "./probe.ts";
