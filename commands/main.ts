// The command line: parses it, loads the config and hands both to the command (commands/, one
// module each; lib/services builds what they run on). main.ts loads this module.
import { type Config, ConfigError } from "../lib/config/mod.ts";
import { type Cli, loadConfig, parseArgs } from "./cli.ts";
import { COMMANDS, helpText } from "./usage.ts";
import { serveCommand } from "./serve.ts";
import { workerCommand } from "./worker.ts";
import { scrubCommand } from "./scrub.ts";
import { verifyCommand } from "./verify.ts";
import { pruneCommand } from "./prune.ts";
import { replicateCommand } from "./replicate.ts";
import { syncCommand } from "./sync.ts";
import { reindexCommand } from "./reindex.ts";
import { scanCommand } from "./scan.ts";
import { advisoriesCommand } from "./advisories.ts";
import { hashPasswordCommand } from "./hash_password.ts";

export async function main(): Promise<number> {
  let cli: Cli;
  let cfg: Config;
  try {
    cli = parseArgs(Deno.args);
    if (cli.help) {
      const known = cli.command === "" || COMMANDS.includes(cli.command);
      if (!known) console.error(`wharf: unknown command ${cli.command}`);
      console.log(helpText(known ? cli.command || null : null));
      return known ? 0 : 2;
    }
    cfg = await loadConfig(cli);
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(`wharf: ${e.message}`);
      return 2;
    }
    throw e;
  }
  switch (cli.command) {
    case "serve":
      return await serveCommand(cfg);
    case "worker":
      return await workerCommand(cfg, cli);
    case "scrub":
      return await scrubCommand(cfg, cli);
    case "verify":
      return await verifyCommand(cfg, cli);
    case "prune":
      return await pruneCommand(cfg, cli);
    case "replicate":
      return await replicateCommand(cfg, cli);
    case "sync":
      return await syncCommand(cfg, cli);
    case "reindex":
      return await reindexCommand(cfg, cli);
    case "scan":
      return await scanCommand(cfg, cli);
    case "advisories":
      return await advisoriesCommand(cfg, cli);
    case "hash-password":
      return await hashPasswordCommand();
    default:
      console.error(
        `wharf: unknown command ${cli.command} (commands: ${COMMANDS.join(", ")}; main.ts --help)`,
      );
      return 2;
  }
}
