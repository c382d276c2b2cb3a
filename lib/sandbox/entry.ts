// The child's side of a self-started sandbox (lib/sandbox/launch.ts): `wharf __sandbox-child
// [--keep-write] [--keep-ffi] <module> <argument>`, which main.ts hands here before it loads
// anything else. The process holds the whole grant its executable was given (a compiled binary's
// is baked in), so before the parse is loaded it gives up what Deno lets a running process give
// up: the network, subprocesses, the environment, system information, and writing and FFI unless
// the parse needs them. Read access cannot be narrowed to paths once granted (Deno revokes a
// path only where that path itself was granted): docs/design.md says so.
import { childMain } from "./child.ts";

/** A child entry module: lib/<folder>/<name>_child.ts, which exports its parse as `main`. */
const CHILD_MODULE = /^lib\/[a-z0-9_]+\/[a-z0-9_]+_child\.ts$/;
const ROOT = new URL("../../", import.meta.url);

export async function sandboxChild(argv: string[]): Promise<number> {
  const keep = new Set<string>();
  let i = 0;
  for (; i < argv.length && argv[i].startsWith("--keep-"); i++) keep.add(argv[i].slice(7));
  const module = argv[i];
  if (argv.length !== i + 2 || !CHILD_MODULE.test(module ?? "")) {
    console.error("wharf: __sandbox-child is Wharf's own sandbox entry point, not a command");
    return 2;
  }
  const give: Deno.PermissionName[] = ["net", "run", "env", "sys"];
  if (!keep.has("write")) give.push("write");
  if (!keep.has("ffi")) give.push("ffi");
  for (const name of give) await Deno.permissions.revoke({ name });
  // A name, not a literal: `deno compile` takes the child modules in with --include (deploy.sh).
  const mod = await import(new URL(module, ROOT).href) as { main?: () => Promise<unknown> };
  if (typeof mod.main !== "function") {
    console.error(`wharf: ${module} has no sandbox main`);
    return 2;
  }
  await childMain(mod.main);
  return 0;
}
