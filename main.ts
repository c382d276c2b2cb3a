// Wharf's entry point. Usage: main.ts [COMMAND] [OPTIONS] [-c FILE]... (later config files win);
// `main.ts --help` and `main.ts COMMAND --help` (commands/usage.ts) describe every command.
//
// A sandbox child started as this same program (a compiled binary's only way: lib/sandbox/
// launch.ts) runs its parse before anything else is loaded: a child must not pay for the
// registry's module graph, and must give up its permissions before any of it runs.
import { SANDBOX_ENTRY, sandboxChild } from "./lib/sandbox/mod.ts";

if (import.meta.main) {
  if (Deno.args[0] === SANDBOX_ENTRY) Deno.exit(await sandboxChild(Deno.args.slice(1)));
  const { main } = await import("./commands/main.ts");
  Deno.exit(await main());
}
