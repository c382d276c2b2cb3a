// `main.ts advisories fetch|status`: the download the `fetch-advisories` job does, once (for a
// connected machine whose files are carried to an offline one), and what is loaded from when.
// Each returns its exit status and the lines main.ts prints.
import { join } from "node:path";
import type { Config } from "../config/mod.ts";
import type { ProgressSink } from "../jobs/mod.ts";
import type { AdvisoryMeta } from "./advisory_store.ts";
import { withScanStores } from "./scan_records.ts";
import { ecosystemUrl, readFetchState, ZIP_NAME } from "./advisory_fetch.ts";
import {
  failureLine,
  fetchInto,
  neededEcosystems,
  nextAttemptAt,
  readFetchRun,
} from "./advisory_refresh.ts";

export interface CommandResult {
  code: number;
  /** for standard output */
  out: string[];
  /** for standard error */
  err: string[];
}

export interface AdvisoriesArgs {
  sub: string | null;
  dir: string | null;
  ecosystems: string[];
  /** `fetch`: ecosystems done and the current download's bytes */
  progress?: ProgressSink;
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
    }; reports say "not checked"`;
  }
  // A snapshot of no records checks nothing: it must not read as advisory data loaded.
  if (m.records === 0) {
    return `advisories: none loaded: snapshot ${m.snapshot} of ${
      new Date(m.loaded_at).toISOString()
    } holds no records (${m.error_count} problem(s)); reports say "not checked"` +
      (m.errors.length ? `\nproblems:\n  ${m.errors.join("\n  ")}` : "");
  }
  return `advisories: snapshot ${m.snapshot} loaded ${
    new Date(m.loaded_at).toISOString()
  } in ${m.load_ms} ms; ${m.records} records, ${m.affected} package entries; ${m.error_count} problem(s)\n` +
    Object.entries(m.ecosystems).map(([e, n]) => `  ${e}: ${n}`).join("\n") +
    (m.errors.length ? `\nproblems:\n  ${m.errors.join("\n  ")}` : "");
}

const kvOf = (cfg: Config) => cfg.metadataStore.url ?? cfg.metadataStore.path;

async function snapshotStatus(cfg: Config): Promise<string> {
  return formatSnapshot(await withScanStores(kvOf(cfg), (s) => s.advisories.meta()), cfg);
}

async function fetchCommand(cfg: Config, args: AdvisoriesArgs): Promise<CommandResult> {
  const r: CommandResult = { code: 0, out: [], err: [] };
  const fail = (msg: string) => ({ ...r, code: 2, err: [`wharf: advisories fetch: ${msg}`] });
  const dir = args.dir ?? cfg.scan.advisoriesDir;
  if (!dir) return fail("name --dir D (or set [scan] advisories_dir)");
  if (cfg.scan.advisoriesUrl === "") return fail('[scan] advisories_url = "" turns downloads off');
  const ecosystems = args.ecosystems.length ? args.ecosystems : await withScanStores(
    kvOf(cfg),
    (s) => neededEcosystems(s.records, cfg.scan.advisoriesEcosystems),
  );
  if (ecosystems.length === 0) {
    return fail(
      "nothing to fetch (no image has a report yet and [scan] advisories_ecosystems is empty); name --ecosystem E (Debian, Alpine, Ubuntu, npm, PyPI, ...)",
    );
  }
  r.out.push(`fetching ${ecosystems.join(", ")} from ${cfg.scan.advisoriesUrl} into ${dir}`);
  const t0 = performance.now();
  let outcomes;
  try {
    outcomes = await fetchInto(cfg, dir, ecosystems, undefined, args.progress);
  } catch (e) {
    return fail(e instanceof Error ? e.message : String(e));
  }
  for (const o of outcomes) {
    if (o.result === "updated") {
      r.out.push(
        `${o.ecosystem}: updated, ${mib(o.bytes)}${
          o.resumedFrom ? ` (resumed at ${mib(o.resumedFrom)})` : ""
        }`,
      );
    } else if (o.result === "unchanged") {
      r.out.push(`${o.ecosystem}: unchanged`);
    } else {
      r.out.push(
        `${o.ecosystem}: failed: ${o.error}${
          o.keptBytes ? ` (${mib(o.keptBytes)} kept, resumed next time)` : ""
        }`,
      );
    }
  }
  const failed = outcomes.filter((o) => o.result === "failed").length;
  const updated = outcomes.filter((o) => o.result === "updated").length;
  const bytes = outcomes.reduce((n, o) => n + (o.result === "updated" ? o.bytes : 0), 0);
  r.out.push(
    `advisories fetch: ${updated} updated, ${
      outcomes.length - updated - failed
    } unchanged, ${failed} failed; ${mib(bytes)} in ${
      ((performance.now() - t0) / 1000).toFixed(1)
    } s${
      updated
        ? `; a Wharf whose [scan] advisories_dir is ${dir} loads them within reload_interval_secs`
        : ""
    }`,
  );
  return { ...r, code: failed ? 1 : 0 };
}

async function statusCommand(cfg: Config, args: AdvisoriesArgs): Promise<CommandResult> {
  const out = [await snapshotStatus(cfg)];
  const done = { code: 0, out, err: [] };
  const s = cfg.scan;
  const dir = args.dir ?? s.advisoriesDir;
  out.push(
    s.advisoriesUrl === ""
      ? 'downloads: off ([scan] advisories_url = "")'
      : s.refreshIntervalSecs !== null && s.advisoriesDir
      ? `downloads: every ${s.refreshIntervalSecs} s from ${s.advisoriesUrl} into ${s.advisoriesDir}`
      : `downloads: only by "advisories fetch" ([scan] refresh_interval_secs unset); source ${s.advisoriesUrl}`,
  );
  if (!dir) return done;
  const run = await readFetchRun(dir);
  if (run) {
    out.push(
      `last download run: started ${iso(run.started_at)}, ${
        run.finished_at === null ? "not finished" : `finished ${iso(run.finished_at)}`
      }; updated ${run.updated.join(", ") || "none"}; unchanged ${
        run.unchanged.join(", ") || "none"
      }; failed ${run.failed.map((f) => f.ecosystem).join(", ") || "none"}`,
    );
    // The schedule is the server's, of its own directory only.
    const interval = s.refreshIntervalSecs !== null && s.advisoriesUrl !== "" &&
        dir === s.advisoriesDir
      ? s.refreshIntervalSecs
      : null;
    const failure = failureLine(run, interval);
    const next = nextAttemptAt(run, interval);
    if (failure) out.push(failure);
    else if (next !== null) out.push(`next download run: at ${iso(next)}`);
  }
  const ecosystems = new Set<string>();
  try {
    for await (const e of Deno.readDir(dir)) if (e.isDirectory) ecosystems.add(e.name);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
    out.push(`files: ${dir} does not exist`);
    return done;
  }
  out.push(`files in ${dir}:`);
  for (const eco of [...ecosystems].sort()) {
    const st = await readFetchState(dir, eco);
    let size: number | null = null;
    try {
      size = (await Deno.stat(join(dir, eco, ZIP_NAME))).size;
    } catch {
      size = null;
    }
    if (!st) {
      out.push(
        `  ${eco}: ${size === null ? "no all.zip" : `all.zip ${mib(size)}, placed by hand`}`,
      );
      continue;
    }
    const source = st.url === ecosystemUrl(s.advisoriesUrl, eco).href ? "" : ` from ${st.url}`;
    out.push(
      `  ${eco}: ${size === null ? "no all.zip yet" : `all.zip ${mib(size)}`}${source}, fetched ${
        iso(st.fetched_at)
      }, last checked ${iso(st.checked_at)}${st.etag ? `, etag ${st.etag}` : ""}${
        st.error ? `; last attempt failed ${iso(st.failed_at)}: ${st.error}` : ""
      }`,
    );
  }
  return done;
}

export async function advisoriesCommand(cfg: Config, args: AdvisoriesArgs): Promise<CommandResult> {
  if (args.sub === "fetch") return await fetchCommand(cfg, args);
  if (args.sub === "status") return await statusCommand(cfg, args);
  return {
    code: 2,
    out: [],
    err: [
      `wharf: advisories: ${
        args.sub ? `unknown subcommand ${args.sub}` : "name a subcommand"
      } (fetch or status; main.ts advisories --help)`,
    ],
  };
}
