// Untrusted content is parsed here: child processes with budgets (docs/design.md).
export { BudgetExceededError, SandboxError } from "./errors.ts";
export {
  ChildError,
  lastRun,
  runSandboxed,
  runSandboxedJson,
  type SandboxSpec,
} from "./process.ts";
export { childArgs, childMain } from "./child.ts";
