// Access policy gate. Until CEL policies land (auth issue), the policy is its `default` alone:
// "allow" admits every request, "deny" refuses every one with the Basic challenge.
import type { Config } from "../lib/config/mod.ts";
import { RegistryError } from "../lib/oci/mod.ts";
import type { Action } from "./actions.ts";

export function authorize(cfg: Config, _a: Action): void {
  if (cfg.global.accessPolicyDefault === "allow") return;
  throw new RegistryError("UNAUTHORIZED", "access denied by policy", {
    headers: { "WWW-Authenticate": 'Basic realm="wharf"' },
  });
}
