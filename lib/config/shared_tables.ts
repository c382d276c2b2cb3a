// Sub-tables more than one section holds: the sandbox mode and budget (`[global.index]`,
// `[scan]`) and an access policy (`[global]`, `[repository."<name>"]`).
import type { PolicyConfig, SandboxBudget, SandboxMode } from "./schema.ts";
import type { Reader } from "./config_reader.ts";
import type { Table } from "./table_readers.ts";

export const SANDBOX_KEYS = [
  "sandbox",
  "max_wall_secs",
  "max_cpu_secs",
  "max_memory_bytes",
] as const;

/** The sandbox mode and budget keys `[global.index]` and `[scan]` share. */
export function readSandbox(
  r: Reader,
  t: Table,
  path: string,
  out: { sandbox: SandboxMode; budget: SandboxBudget },
): void {
  const mode = r.str(t, "sandbox", path) ?? out.sandbox;
  if (!["process", "worker", "off"].includes(mode)) {
    r.fail(`${path}.sandbox`, "must be one of process, worker, off");
  }
  out.sandbox = mode as SandboxMode;
  out.budget = {
    wallSecs: r.int(t, "max_wall_secs", path, 1) ?? out.budget.wallSecs,
    cpuSecs: r.int(t, "max_cpu_secs", path, 1) ?? out.budget.cpuSecs,
    memoryBytes: r.int(t, "max_memory_bytes", path, 64 * 1024 * 1024) ?? out.budget.memoryBytes,
  };
}

export function readPolicy(r: Reader, v: unknown, path: string): PolicyConfig | undefined {
  if (v === undefined) return undefined;
  const t = r.table(v, path);
  r.only(t, path, ["default", "rules"]);
  const def = r.str(t, "default", path) ?? "allow";
  if (def !== "allow" && def !== "deny") r.fail(`${path}.default`, `must be "allow" or "deny"`);
  return { default: def, rules: r.strings(t, "rules", path) ?? [] };
}
