// The command line: `main.ts [COMMAND] [OPTIONS] [-c FILE]...` parsed into one Cli, and the
// config it names (later files win; none at all gives the newcomer's defaults).
import {
  type Config,
  ConfigError,
  defaultConfig,
  isEcosystemName,
  JOB_QUEUES,
  listenOverrides,
  loadConfigFiles,
  type QueueName,
  setListenOverrides,
  withListenOverrides,
} from "../lib/config/mod.ts";
import { isQueueName } from "../lib/jobs/mod.ts";

export interface Cli {
  command: string;
  configFiles: string[];
  dryRun: boolean;
  /** `worker --queue`: the queues to drain (default all) */
  queues: QueueName[];
  /** `reindex --force` */
  force: boolean;
  /** `scan --namespace N` */
  namespace: string | null;
  /** `scan --rescan`: queue every image, not only those without a current report */
  rescan: boolean;
  /** `scan --status` */
  status: boolean;
  /** `prune --now <RFC 3339>`: the clock retention rules see (ms) */
  now: number | null;
  /** `sync --repository R`: that repository's syncs only */
  repository: string | null;
  /** `--help`: print the command's usage, run nothing */
  help: boolean;
  /** `advisories fetch|status` */
  sub: string | null;
  /** `advisories --dir D` */
  dir: string | null;
  /** `advisories fetch --ecosystem E` */
  ecosystems: string[];
  /** `verify --rate N`: bytes hashed per second at most (0: no limit); null: the config's */
  rate: number | null;
  /** `serve --port N`, as given (checked when the config loads, with WHARF_PORT) */
  port: string | null;
  /** `serve --bind ADDR`, as given */
  bind: string | null;
  /** `--quiet` of the long commands (PROGRESS_COMMANDS): the summary and errors only */
  quiet: boolean;
  /** `--json` of the long commands: progress events and the summary as JSON lines */
  json: boolean;
}

/** The commands that show progress while they work (commands/progress.ts). */
export const PROGRESS_COMMANDS = ["reindex", "scan", "scrub", "sync", "prune", "advisories"];

export function parseArgs(args: string[]): Cli {
  const cli: Cli = {
    command: "serve",
    configFiles: [],
    dryRun: false,
    queues: [],
    force: false,
    namespace: null,
    rescan: false,
    status: false,
    now: null,
    repository: null,
    help: false,
    sub: null,
    dir: null,
    ecosystems: [],
    rate: null,
    port: null,
    bind: null,
    quiet: false,
    json: false,
  };
  let i = 0;
  const named = args[0] !== undefined && !args[0].startsWith("-");
  if (named) cli.command = args[i++];
  if (cli.command === "help") [cli.command, cli.help] = [args[i++] ?? "", true];
  if (cli.command === "advisories" && args[i] && !args[i].startsWith("-")) cli.sub = args[i++];
  // Asking for help never fails on the other arguments.
  if (args.includes("--help") || args.includes("-h")) {
    return { ...cli, command: named ? cli.command : "", help: true };
  }
  for (; i < args.length; i++) {
    const a = args[i];
    if (a === "-c" || a === "--config") {
      const f = args[++i];
      if (!f) throw new ConfigError(`${a} needs a file`);
      cli.configFiles.push(f);
    } else if (a === "--dry-run") {
      cli.dryRun = true;
    } else if (a === "--force") {
      cli.force = true;
    } else if (a === "--rescan") {
      cli.rescan = true;
    } else if (a === "--status") {
      cli.status = true;
    } else if (a === "--now") {
      const t = Date.parse(args[++i] ?? "");
      if (!Number.isFinite(t)) throw new ConfigError(`--now needs an RFC 3339 time`);
      cli.now = t;
    } else if (a === "--repository") {
      const r = args[++i];
      if (!r) throw new ConfigError(`--repository needs a repository name`);
      cli.repository = r;
    } else if (a === "--namespace") {
      const n = args[++i];
      if (!n) throw new ConfigError(`--namespace needs a repository name`);
      cli.namespace = n;
    } else if (a === "--queue" || a.startsWith("--queue=")) {
      const q = a === "--queue" ? args[++i] : a.slice("--queue=".length);
      if (!q || !isQueueName(q)) {
        throw new ConfigError(
          `--queue needs one of ${JOB_QUEUES.join(", ")} (got ${q ?? "nothing"})`,
        );
      }
      if (!cli.queues.includes(q)) cli.queues.push(q);
    } else if (a === "--rate") {
      const v = args[++i] ?? "";
      if (!/^\d{1,15}$/.test(v)) {
        throw new ConfigError(
          `--rate needs bytes per second, 0 for no limit (got ${v || "nothing"})`,
        );
      }
      cli.rate = Number(v);
    } else if (a === "--dir") {
      const d = args[++i];
      if (!d) throw new ConfigError(`--dir needs a directory`);
      cli.dir = d;
    } else if (a === "--ecosystem") {
      const e = args[++i];
      if (!e || !isEcosystemName(e)) {
        throw new ConfigError(
          `--ecosystem needs an OSV ecosystem name such as Debian, Alpine, npm (got ${
            e ?? "nothing"
          })`,
        );
      }
      if (!cli.ecosystems.includes(e)) cli.ecosystems.push(e);
    } else if (/^--(port|bind)(=|$)/.test(a)) {
      const flag = a.startsWith("--port") ? "--port" : "--bind";
      const v = a.includes("=") ? a.slice(a.indexOf("=") + 1) : args[++i];
      if (cli.command !== "serve") {
        throw new ConfigError(`${flag} is an option of serve only (main.ts serve ${flag} ...)`);
      }
      if (v === undefined) {
        throw new ConfigError(`${flag} needs ${flag === "--port" ? "a port" : "an address"}`);
      }
      if (flag === "--port") cli.port = v;
      else cli.bind = v;
    } else if (a === "--quiet" || a === "-q" || a === "--json") {
      if (!PROGRESS_COMMANDS.includes(cli.command)) {
        throw new ConfigError(
          `${a} is an option of ${
            PROGRESS_COMMANDS.join(", ")
          } only (main.ts ${cli.command} --help)`,
        );
      }
      if (a === "--json") cli.json = true;
      else cli.quiet = true;
      if (cli.quiet && cli.json) throw new ConfigError(`--quiet and --json exclude each other`);
    } else if (a.startsWith("--config=")) {
      cli.configFiles.push(a.slice("--config=".length));
    } else {
      throw new ConfigError(
        `unknown argument ${a} (main.ts ${cli.command} --help lists the options)`,
      );
    }
  }
  return cli;
}

/**
 * The config of `cli`'s files (throws ConfigError), or the defaults when it names none. serve's
 * address may come from its flags or the environment too: flag > WHARF_PORT / WHARF_BIND >
 * config > default, for this load and every reload.
 */
export async function loadConfig(cli: Cli): Promise<Config> {
  if (cli.command === "serve") {
    setListenOverrides(listenOverrides(cli, (name) => Deno.env.get(name)));
  }
  if (cli.configFiles.length) return await loadConfigFiles(cli.configFiles);
  // No config file at all: a newcomer's browser should find the UI (DESIGN.md §Repositories),
  // and reports their advisories, fetched from osv.dev daily.
  const cfg = defaultConfig();
  cfg.ui.enabled = true;
  cfg.scan.advisoriesDir = "./data/advisories";
  cfg.scan.refreshIntervalSecs = 86_400;
  return withListenOverrides(cfg);
}
