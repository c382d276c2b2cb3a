// Startup's proof that a sandbox child really starts here (lib/sandbox/probe_child.ts): a grant
// can be right and the child still fail (a module cache it cannot read, a runtime it cannot
// execute as this user, a missing shared library). ~30 ms from source, ~70 ms self-started.
import { SandboxUnavailableError } from "./errors.ts";
import { runSandboxedJson } from "./run.ts";
import type { SandboxMode } from "../config/mod.ts";

const PROBE = new URL("./probe_child.ts", import.meta.url);
/** Generous: a loaded machine may take seconds to start a process; a broken one fails fast. */
const PROBE_BUDGET = { wallSecs: 30, cpuSecs: 30, memoryBytes: 512 << 20 };

/** Why a `mode` sandbox child cannot run here, or null once one ran. */
export async function probeSandbox(mode: Exclude<SandboxMode, "off">): Promise<string | null> {
  try {
    const r = await runSandboxedJson<{ ran?: boolean }>({
      mode,
      label: "startup probe",
      module: PROBE,
      args: null,
      budget: PROBE_BUDGET,
    });
    return r?.ran === true ? null : "the sandbox probe printed no result";
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    return e instanceof SandboxUnavailableError ? why : `a sandbox child failed: ${why}`;
  }
}
