// `main.ts advisories fetch|status`: downloads OSV advisories into a directory, or says what it
// holds (lib/scan/advisory_commands.ts; no KV or blob store is opened). `fetch` shows the
// ecosystems done and the current download's bytes (commands/progress.ts), each ecosystem's
// outcome, then its summary line.
import type { Config } from "../lib/config/mod.ts";
import { advisoriesCommand as run } from "../lib/scan/mod.ts";
import type { Cli } from "./cli.ts";
import { reporterFor } from "./progress.ts";

export async function advisoriesCommand(cfg: Config, cli: Cli): Promise<number> {
  const p = reporterFor(cli.sub === "fetch" ? "advisories fetch" : "advisories", cli);
  try {
    const r = await run(cfg, { ...cli, progress: p.sink });
    for (const line of r.err) p.error(line);
    if (r.out.length === 0) return r.code;
    if (cli.sub === "fetch") {
      // "fetching … into D", one line per ecosystem, the summary.
      const [first, ...rest] = r.out;
      const last = rest.pop();
      p.line(first);
      for (const line of rest) p.result(line, { ecosystem: line.slice(0, line.indexOf(":")) });
      if (last !== undefined) p.summary(last, { exit_code: r.code });
    } else p.summary(r.out.join("\n"));
    return r.code;
  } finally {
    p.stop();
  }
}
