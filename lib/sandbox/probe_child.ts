// A sandbox child that parses nothing: it answers with what it may do, so startup can prove a
// child starts and tests can see the grant a child really holds (lib/sandbox/launch.ts).
import { childMain } from "./child.ts";

const NAMES = ["read", "write", "net", "env", "run", "sys", "ffi"] as const;

/** The child's permissions, each "granted" or not, and that it ran. */
export function main(): Promise<unknown> {
  const grant: Record<string, string> = {};
  for (const name of NAMES) {
    grant[name] = Deno.permissions.querySync({ name } as Deno.PermissionDescriptor).state;
  }
  return Promise.resolve({ ran: true, grant });
}

if (import.meta.main) await childMain(main);
