// Advisories that arrive by themselves: with `[scan] refresh_interval_secs`, a `fetch-advisories`
// job on the `scan` queue downloads the dumps of the ecosystems Wharf's images need (plus
// `advisories_ecosystems`) into `advisories_dir`; a file that changed queues the load job, whose
// new snapshot queues the rescan of every image. The advisory watch's timer asks whether a run is
// due; a scan whose image needs an ecosystem not fetched yet asks for one at once, so the first
// push of a new distro does not wait a whole interval for its advisories.
//
// A run that cannot download (offline, a source that is down) is not retried by the queue: it
// says so in one warn line with the cause and when the next attempt is, and that attempt comes
// after a pause that doubles with each failed run in a row (15 minutes, 30, 1 hour, ...) up to
// the refresh interval. `advisories status` and a report's `advisory_download` say the same.
import type { Config } from "../config/mod.ts";
import { type JobContext, PermanentJobError, type ProgressSink } from "../jobs/mod.ts";
import { log } from "../log.ts";
import { AdvisoryFetcher, ecosystemsIn, type FetchOutcome } from "./advisory_fetch.ts";
import { recordEcosystems } from "./ecosystems.ts";
import type { ScanDeps } from "./scanner.ts";
import type { ScanRecords } from "./scan_records.ts";
import { join } from "node:path";

export const FETCH_KIND = "fetch-advisories";
const FETCH_LOCK = "advisories-fetch";
/** `<advisories_dir>/.fetch-run`: the last run, for the schedule and `advisories status`. */
const RUN_FILE = ".fetch-run";

export interface FetchRun {
  started_at: number;
  finished_at: number | null;
  updated: string[];
  unchanged: string[];
  failed: { ecosystem: string; error: string }[];
  /** runs in a row, this one included, where an ecosystem failed (absent in older records) */
  failures?: number;
}

/** The pause after the first failed run in a row; it doubles with each next one. */
export const FIRST_RETRY_SECS = 15 * 60;

/**
 * When the run after `run` is due (ms): a refresh interval after it started, or, after a failed
 * run, FIRST_RETRY_SECS doubled per failed run in a row before it, at most the interval. Null
 * without an interval (downloads only by `advisories fetch`).
 */
export function nextAttemptAt(run: FetchRun, intervalSecs: number | null): number | null {
  if (intervalSecs === null) return null;
  const failures = run.failed.length > 0 ? Math.max(1, run.failures ?? 1) : 0;
  const pause = failures === 0
    ? intervalSecs
    : Math.min(intervalSecs, FIRST_RETRY_SECS * 2 ** Math.min(failures - 1, 30));
  return run.started_at + pause * 1000;
}

/**
 * The failures of `run` in one line: the ecosystems that failed alike are named together with
 * the first one's cause (an offline machine fails every ecosystem the same way).
 */
export function failedText(run: FetchRun): string {
  const groups = new Map<string, { ecosystems: string[]; error: string }>();
  for (const f of run.failed) {
    const key = f.error.replaceAll(encodeURIComponent(f.ecosystem), "\0")
      .replaceAll(f.ecosystem, "\0");
    const g = groups.get(key) ?? { ecosystems: [], error: f.error };
    g.ecosystems.push(f.ecosystem);
    groups.set(key, g);
  }
  return [...groups.values()].map((g) => `${g.ecosystems.join(", ")}: ${g.error}`).join("; ");
}

/**
 * What the warn line, `advisories status` and a report say of a run that failed: the cause and
 * when the next attempt is. Null for a run without failures.
 */
export function failureLine(run: FetchRun, intervalSecs: number | null): string | null {
  if (run.failed.length === 0) return null;
  const next = nextAttemptAt(run, intervalSecs);
  return `advisory download failed: ${failedText(run)}; next attempt ${
    next === null
      ? 'when "advisories fetch" runs ([scan] refresh_interval_secs is unset)'
      : `at ${new Date(next).toISOString()}`
  }`;
}

/** A report's note of the last download when it failed (docs/api.md `advisory_download`). */
export interface AdvisoryDownloadProblem {
  /** the sentence `advisories status` prints */
  message: string;
  failed: { ecosystem: string; error: string }[];
  failed_at: string;
  /** null: only `advisories fetch` downloads */
  next_attempt_at: string | null;
}

export async function readFetchRun(dir: string): Promise<FetchRun | null> {
  try {
    return JSON.parse(await Deno.readTextFile(join(dir, RUN_FILE))) as FetchRun;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound || e instanceof SyntaxError) return null;
    throw e;
  }
}

async function writeFetchRun(dir: string, run: FetchRun): Promise<void> {
  await Deno.mkdir(dir, { recursive: true });
  const tmp = join(dir, `${RUN_FILE}.${crypto.randomUUID().slice(0, 8)}.tmp`);
  await Deno.writeTextFile(tmp, JSON.stringify(run, null, 2) + "\n");
  await Deno.rename(tmp, join(dir, RUN_FILE));
}

/** The ecosystems of every image with a report, plus the configured extras. */
export async function neededEcosystems(
  records: Pick<ScanRecords, "all">,
  extras: readonly string[],
): Promise<string[]> {
  const out = new Set(extras);
  for await (const e of records.all()) {
    for (const eco of recordEcosystems(e.value)) out.add(eco);
  }
  return [...out].sort();
}

/** A fetcher for `cfg`'s source into `dir`; an unreadable CA bundle throws here. */
export function fetcherFor(
  cfg: Config,
  dir: string,
  signal?: AbortSignal,
  progress?: ProgressSink,
): AdvisoryFetcher {
  let caCerts: string[] | undefined;
  const ca = cfg.scan.advisoriesCaBundle;
  if (ca !== null) {
    try {
      caCerts = [Deno.readTextFileSync(ca)];
    } catch (e) {
      throw new Error(
        `cannot read scan.advisories_ca_bundle ${ca}: ${e instanceof Error ? e.message : e}`,
      );
    }
  }
  return new AdvisoryFetcher({
    baseUrl: cfg.scan.advisoriesUrl,
    dir,
    caCerts,
    outboundAllow: cfg.global.outboundAllow,
    signal,
    progress,
  });
}

/** Downloads `ecosystems` into `dir` and records the run beside them. */
export async function fetchInto(
  cfg: Config,
  dir: string,
  ecosystems: string[],
  signal?: AbortSignal,
  progress?: ProgressSink,
): Promise<FetchOutcome[]> {
  const before = await readFetchRun(dir);
  const run: FetchRun = {
    started_at: Date.now(),
    finished_at: null,
    updated: [],
    unchanged: [],
    failed: [],
  };
  await writeFetchRun(dir, run);
  const fetcher = fetcherFor(cfg, dir, signal, progress);
  try {
    const outcomes = await fetcher.fetchAll(ecosystems);
    for (const o of outcomes) {
      if (o.result === "updated") run.updated.push(o.ecosystem);
      else if (o.result === "unchanged") run.unchanged.push(o.ecosystem);
      else run.failed.push({ ecosystem: o.ecosystem, error: o.error.slice(0, 500) });
    }
    run.finished_at = Date.now();
    if (run.failed.length > 0) {
      run.failures = (before?.failed.length ? before.failures ?? 1 : 0) + 1;
    }
    await writeFetchRun(dir, run);
    return outcomes;
  } finally {
    fetcher.close();
  }
}

export class AdvisoryRefresh {
  constructor(
    private readonly cfg: Config,
    private readonly deps: Pick<ScanDeps, "records" | "jobs">,
    /** queues the load of what changed */
    private readonly onUpdated: () => Promise<void>,
  ) {}

  /** Where to, when downloads are on: `advisories_dir` with a refresh interval and a URL. */
  get dir(): string | null {
    const s = this.cfg.scan;
    return s.advisoriesDir && s.advisoriesUrl !== "" && s.refreshIntervalSecs !== null
      ? s.advisoriesDir
      : null;
  }

  register(): void {
    this.deps.jobs.handle("scan", FETCH_KIND, (job) => this.run(job));
  }

  async queue(): Promise<void> {
    await this.deps.jobs.queue("scan").enqueue({
      kind: FETCH_KIND,
      payload: null,
      lockKey: FETCH_LOCK,
    });
  }

  /** Queues a run when the last one started `refresh_interval_secs` ago (or never did). */
  async tick(now = Date.now()): Promise<void> {
    const dir = this.dir;
    if (!dir) return;
    // The watch reads the directory; a first start must not find it missing.
    await Deno.mkdir(dir, { recursive: true });
    const last = await readFetchRun(dir);
    if (last && now < nextAttemptAt(last, this.cfg.scan.refreshIntervalSecs)!) return;
    await this.queue();
  }

  /** The last download run's failure, when it failed (for a report's `advisory_download`). */
  async problem(): Promise<AdvisoryDownloadProblem | null> {
    const dir = this.cfg.scan.advisoriesDir;
    if (!dir) return null;
    const run = await readFetchRun(dir).catch(() => null);
    const message = run && failureLine(run, this.dir ? this.cfg.scan.refreshIntervalSecs : null);
    if (!run || !message) return null;
    const next = nextAttemptAt(run, this.dir ? this.cfg.scan.refreshIntervalSecs : null);
    return {
      message,
      failed: run.failed,
      failed_at: new Date(run.finished_at ?? run.started_at).toISOString(),
      next_attempt_at: next === null ? null : new Date(next).toISOString(),
    };
  }

  /** After a scan: queues a run when the image needs an ecosystem never fetched. */
  async scanned(digest: string): Promise<void> {
    const dir = this.dir;
    if (!dir) return;
    const rec = await this.deps.records.get(digest);
    if (!rec) return;
    const held = new Set(await ecosystemsIn(dir));
    if (recordEcosystems(rec).some((e) => !held.has(e))) await this.queue();
  }

  private async run(job: JobContext): Promise<void> {
    const dir = this.dir;
    if (!dir) throw new PermanentJobError("[scan] refresh_interval_secs is not set");
    const ecosystems = await neededEcosystems(
      this.deps.records,
      this.cfg.scan.advisoriesEcosystems,
    );
    let outcomes: FetchOutcome[];
    try {
      outcomes = await fetchInto(this.cfg, dir, ecosystems, job.signal);
    } catch (e) {
      if (job.signal.aborted) throw e;
      throw new PermanentJobError(e instanceof Error ? e.message : String(e));
    }
    const updated = outcomes.filter((o) => o.result === "updated");
    if (updated.length > 0) await this.onUpdated();
    const run = await readFetchRun(dir);
    const failure = run && failureLine(run, this.cfg.scan.refreshIntervalSecs);
    if (run && failure) {
      // Not thrown: the queue's retries would fail alike, each with its own lines. The next
      // attempt is the schedule's (nextAttemptAt).
      log.warn(failure, {
        failed: run.failed.map((f) => f.ecosystem).join(","),
        updated: updated.map((o) => o.ecosystem).join(",") || "none",
        next_attempt: new Date(nextAttemptAt(run, this.cfg.scan.refreshIntervalSecs)!)
          .toISOString(),
      });
      return;
    }
    log.info("advisories fetched", {
      updated: updated.map((o) => o.ecosystem).join(",") || "none",
      unchanged: outcomes.filter((o) => o.result === "unchanged").length,
    });
  }
}
