// Wharf's composition root: reads config, opens KV and the blob store, serves.
// Usage: main.ts [serve] [-c FILE]...   (later files win)
import { type Config, ConfigError, defaultConfig, loadConfigFiles } from "./lib/config/mod.ts";
import { openMetadata } from "./lib/metadata/mod.ts";
import { FsBlobStore } from "./lib/storage/mod.ts";
import { Registry } from "./lib/registry/mod.ts";
import { createApp } from "./routes/app.ts";
import { log } from "./lib/log.ts";

interface Cli {
  command: string;
  configFiles: string[];
}

function parseArgs(args: string[]): Cli {
  const cli: Cli = { command: "serve", configFiles: [] };
  let i = 0;
  if (args[0] && !args[0].startsWith("-")) cli.command = args[i++];
  for (; i < args.length; i++) {
    const a = args[i];
    if (a === "-c" || a === "--config") {
      const f = args[++i];
      if (!f) throw new ConfigError(`${a} needs a file`);
      cli.configFiles.push(f);
    } else if (a.startsWith("--config=")) {
      cli.configFiles.push(a.slice("--config=".length));
    } else {
      throw new ConfigError(`unknown argument ${a}`);
    }
  }
  return cli;
}

async function serve(cfg: Config): Promise<void> {
  const store = new FsBlobStore(cfg.blobStore.fs.rootDir);
  await store.init();
  const kv = await openMetadata(cfg.metadataStore.path);
  const registry = new Registry(cfg, kv, store);
  const app = createApp({ registry });
  const ac = new AbortController();
  const server = Deno.serve({
    hostname: cfg.server.bindAddress,
    port: cfg.server.port,
    signal: ac.signal,
    onListen: ({ hostname, port }) => {
      const policy = cfg.global.accessPolicyDefault === "allow"
        ? "access policy: allow all"
        : "access policy: deny all";
      const source = cfg.sources.length
        ? `config ${cfg.sources.join(", ")}`
        : "embedded default config";
      console.log(
        `wharf listening on http://${hostname}:${port} (${source}; blobs ${cfg.blobStore.fs.rootDir}; metadata ${cfg.metadataStore.path}; ${policy})`,
      );
    },
    onError: (e) => {
      log.error("unhandled server error", { error: e instanceof Error ? e.stack : String(e) });
      return new Response(
        JSON.stringify({
          errors: [{ code: "INTERNAL_ERROR", message: "internal server error", detail: "" }],
        }),
        {
          status: 500,
          headers: { "Content-Type": "application/json" },
        },
      );
    },
  }, app.fetch);
  const stop = () => ac.abort();
  Deno.addSignalListener("SIGTERM", stop);
  Deno.addSignalListener("SIGINT", stop);
  await server.finished;
  kv.close();
}

async function main(): Promise<number> {
  let cli: Cli;
  let cfg: Config;
  try {
    cli = parseArgs(Deno.args);
    cfg = cli.configFiles.length ? await loadConfigFiles(cli.configFiles) : defaultConfig();
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(`wharf: ${e.message}`);
      return 2;
    }
    throw e;
  }
  switch (cli.command) {
    case "serve":
      await serve(cfg);
      return 0;
    default:
      console.error(`wharf: unknown command ${cli.command} (commands: serve)`);
      return 2;
  }
}

if (import.meta.main) Deno.exit(await main());
