// `main.ts advisories fetch|status`: downloads OSV advisories into a directory, or says what it
// holds (lib/scan/advisory_commands.ts; no KV or blob store is opened).
import type { Config } from "../lib/config/mod.ts";
import { advisoriesCommand as run } from "../lib/scan/mod.ts";
import type { Cli } from "./cli.ts";

export async function advisoriesCommand(cfg: Config, cli: Cli): Promise<number> {
  const r = await run(cfg, cli);
  for (const line of r.out) console.log(line);
  for (const line of r.err) console.error(line);
  return r.code;
}
