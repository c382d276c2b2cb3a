// `main.ts advisories fetch|status`: the download the `fetch-advisories` job does, once (for a
// connected machine whose files are carried to an offline one), and what is loaded from when.
import { join } from "node:path";
import type { Config } from "../lib/config/mod.ts";
import { openMetadata } from "../lib/metadata/mod.ts";
import {
  type AdvisoryMeta,
  AdvisoryStore,
  ecosystemUrl,
  fetchInto,
  neededEcosystems,
  readFetchRun,
  readFetchState,
  ZIP_NAME,
} from "../lib/scan/mod.ts";

export interface AdvisoriesArgs {
  sub: string | null;
  dir: string | null;
  ecosystems: string[];
}

const iso = (ms: number | null) => ms === null ? "never" : new Date(ms).toISOString();

function mib(n: number): string {
  return `${(n / (1 << 20)).toFixed(1)} MiB`;
}

/** The loaded snapshot, as `scan --status` and `advisories status` print it. */
export function formatSnapshot(m: AdvisoryMeta | null, cfg: Config): string {
  if (!m) {
    return `advisories: none loaded${
      cfg.scan.advisoriesDir ? ` (dir ${cfg.scan.advisoriesDir})` : " ([scan] advisories_dir unset)"
    }`;
  }
  return `advisories: snapshot ${m.snapshot} loaded ${
    new Date(m.loaded_at).toISOString()
  } in ${m.load_ms} ms; ${m.records} records, ${m.affected} package entries; ${m.error_count} problem(s)\n` +
    Object.entries(m.ecosystems).map(([e, n]) => `  ${e}: ${n}`).join("\n") +
    (m.errors.length ? `\nproblems:\n  ${m.errors.join("\n  ")}` : "");
}

async function withKv<T>(cfg: Config, f: (kv: Deno.Kv) => Promise<T>): Promise<T> {
  const kv = await openMetadata(cfg.metadataStore.url ?? cfg.metadataStore.path);
  try {
    return await f(kv);
  } finally {
    kv.close();
  }
}

async function snapshotStatus(cfg: Config): Promise<string> {
  return formatSnapshot(await withKv(cfg, (kv) => new AdvisoryStore(kv).meta()), cfg);
}

async function fetchCommand(cfg: Config, args: AdvisoriesArgs): Promise<number> {
  const dir = args.dir ?? cfg.scan.advisoriesDir;
  if (!dir) {
    console.error("wharf: advisories fetch: name --dir D (or set [scan] advisories_dir)");
    return 2;
  }
  if (cfg.scan.advisoriesUrl === "") {
    console.error('wharf: advisories fetch: [scan] advisories_url = "" turns downloads off');
    return 2;
  }
  const ecosystems = args.ecosystems.length
    ? args.ecosystems
    : await withKv(cfg, (kv) => neededEcosystems(kv, cfg.scan.advisoriesEcosystems));
  if (ecosystems.length === 0) {
    console.error(
      "wharf: advisories fetch: nothing to fetch (no image has a report yet and [scan] advisories_ecosystems is empty); name --ecosystem E (Debian, Alpine, Ubuntu, npm, PyPI, ...)",
    );
    return 2;
  }
  console.log(
    `fetching ${ecosystems.join(", ")} from ${cfg.scan.advisoriesUrl} into ${dir}`,
  );
  let outcomes;
  try {
    outcomes = await fetchInto(cfg, dir, ecosystems);
  } catch (e) {
    console.error(`wharf: advisories fetch: ${e instanceof Error ? e.message : e}`);
    return 2;
  }
  for (const o of outcomes) {
    if (o.result === "updated") {
      console.log(
        `${o.ecosystem}: updated, ${mib(o.bytes)}${
          o.resumedFrom ? ` (resumed at ${mib(o.resumedFrom)})` : ""
        }`,
      );
    } else if (o.result === "unchanged") {
      console.log(`${o.ecosystem}: unchanged`);
    } else {
      console.log(
        `${o.ecosystem}: failed: ${o.error}${
          o.keptBytes ? ` (${mib(o.keptBytes)} kept, resumed next time)` : ""
        }`,
      );
    }
  }
  const failed = outcomes.filter((o) => o.result === "failed").length;
  const updated = outcomes.filter((o) => o.result === "updated").length;
  console.log(
    `advisories fetch: ${updated} updated, ${
      outcomes.length - updated - failed
    } unchanged, ${failed} failed${
      updated
        ? `; a Wharf whose [scan] advisories_dir is ${dir} loads them within reload_interval_secs`
        : ""
    }`,
  );
  return failed ? 1 : 0;
}

async function statusCommand(cfg: Config, args: AdvisoriesArgs): Promise<number> {
  console.log(await snapshotStatus(cfg));
  const s = cfg.scan;
  const dir = args.dir ?? s.advisoriesDir;
  console.log(
    s.advisoriesUrl === ""
      ? 'downloads: off ([scan] advisories_url = "")'
      : s.refreshIntervalSecs !== null && s.advisoriesDir
      ? `downloads: every ${s.refreshIntervalSecs} s from ${s.advisoriesUrl} into ${s.advisoriesDir}`
      : `downloads: only by "advisories fetch" ([scan] refresh_interval_secs unset); source ${s.advisoriesUrl}`,
  );
  if (!dir) return 0;
  const run = await readFetchRun(dir);
  if (run) {
    console.log(
      `last download run: started ${iso(run.started_at)}, ${
        run.finished_at === null ? "not finished" : `finished ${iso(run.finished_at)}`
      }; updated ${run.updated.join(", ") || "none"}; unchanged ${
        run.unchanged.join(", ") || "none"
      }; failed ${run.failed.map((f) => f.ecosystem).join(", ") || "none"}`,
    );
  }
  const ecosystems = new Set<string>();
  try {
    for await (const e of Deno.readDir(dir)) if (e.isDirectory) ecosystems.add(e.name);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
    console.log(`files: ${dir} does not exist`);
    return 0;
  }
  console.log(`files in ${dir}:`);
  for (const eco of [...ecosystems].sort()) {
    const st = await readFetchState(dir, eco);
    let size: number | null = null;
    try {
      size = (await Deno.stat(join(dir, eco, ZIP_NAME))).size;
    } catch {
      size = null;
    }
    if (!st) {
      console.log(
        `  ${eco}: ${size === null ? "no all.zip" : `all.zip ${mib(size)}, placed by hand`}`,
      );
      continue;
    }
    const source = st.url === ecosystemUrl(s.advisoriesUrl, eco).href ? "" : ` from ${st.url}`;
    console.log(
      `  ${eco}: ${size === null ? "no all.zip yet" : `all.zip ${mib(size)}`}${source}, fetched ${
        iso(st.fetched_at)
      }, last checked ${iso(st.checked_at)}${st.etag ? `, etag ${st.etag}` : ""}${
        st.error ? `; last attempt failed ${iso(st.failed_at)}: ${st.error}` : ""
      }`,
    );
  }
  return 0;
}

export async function advisoriesCommand(cfg: Config, args: AdvisoriesArgs): Promise<number> {
  if (args.sub === "fetch") return await fetchCommand(cfg, args);
  if (args.sub === "status") return await statusCommand(cfg, args);
  console.error(
    `wharf: advisories: ${
      args.sub ? `unknown subcommand ${args.sub}` : "name a subcommand"
    } (fetch or status; main.ts advisories --help)`,
  );
  return 2;
}
