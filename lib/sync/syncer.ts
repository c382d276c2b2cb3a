// Runs a repository's syncs on the job queues (DESIGN.md Jobs), so the schedule is as durable
// as any job: each `[[repository."<name>".sync]]` entry has one `sync` job on the `cache` queue
// (lock key `sync:<repository>#<n>`) whose not-before time is the next run; a run ends by
// queuing the next one. The jobs admin API and the UI's jobs view list them with the `cache`
// jobs. A run holds the repository's KV lease (state.ts, held while it runs by lib/kv's
// holdWhileRunning), so a scheduled run, `main.ts sync` and a second server never run one
// repository's sync at the same time; a run whose process died is taken over when its job lease
// expires and resumes from its cursor.
import type { Config } from "../config/mod.ts";
import type { JobContext, ProgressSink } from "../jobs/mod.ts";
import { holdWhileRunning } from "../kv/mod.ts";
import type { SyncDeps } from "./deps.ts";
import { log } from "../log.ts";
import { SyncRun } from "./run.ts";
import { syncLeaseMs, type SyncRunRecord, type SyncState } from "./state.ts";

/** The `cache` job kind of a scheduled sync run. */
export const SYNC_KIND = "sync";

interface SyncPayload {
  repository: string;
  index: number;
}

export const syncLockKey = (repository: string, n: number) => `sync:${repository}#${n}`;

export type RunResult = { busy: string } | { record: SyncRunRecord };

export class Syncer {
  readonly state: SyncState;
  private readonly leaseMs: number;

  constructor(private readonly cfg: Config, private readonly deps: SyncDeps) {
    this.state = deps.state;
    this.leaseMs = syncLeaseMs(cfg.global.jobQueue.leaseSecs);
  }

  /** The same records and readers under another config (a reload's new entries). */
  withConfig(cfg: Config): Syncer {
    return new Syncer(cfg, this.deps);
  }

  /** Every configured entry as [repository, n]. Read per call: a reload may change them. */
  entries(repository?: string): [string, number][] {
    const out: [string, number][] = [];
    for (const rc of this.cfg.repositories.values()) {
      if (repository !== undefined && rc.name !== repository) continue;
      (rc.syncs ?? []).forEach((_, n) => out.push([rc.name, n]));
    }
    return out;
  }

  /** Registers the `sync` job kind (before the runner starts). */
  register(): void {
    this.deps.jobs.handle("cache", SYNC_KIND, (job) => this.job(job));
  }

  /** Queues each entry's next run unless one is pending (startup of `serve` and `worker`). */
  async schedule(): Promise<void> {
    for (const [repo, n] of this.entries()) {
      const last = await this.state.last(repo, n);
      await this.enqueue(repo, n, last?.next_at ?? Date.now());
    }
  }

  private async enqueue(repository: string, n: number, at: number): Promise<void> {
    await this.deps.jobs.queue("cache").enqueue({
      kind: SYNC_KIND,
      payload: { repository, index: n } satisfies SyncPayload,
      lockKey: syncLockKey(repository, n),
      notBefore: Math.max(at, Date.now()),
    });
  }

  private async job(job: JobContext): Promise<void> {
    const p = job.payload as Partial<SyncPayload> | null;
    const repo = p?.repository;
    const n = p?.index;
    if (typeof repo !== "string" || typeof n !== "number") return;
    if (!this.cfg.repositories.get(repo)?.syncs?.[n]) return; // the entry left the config
    const resume = await this.state.inProgress(repo, n);
    const last = await this.state.last(repo, n);
    // A second job of one entry (two servers starting, a CLI run meanwhile): not due yet.
    if (!resume && last?.next_at && last.next_at > Date.now() + 1000) {
      await this.enqueue(repo, n, last.next_at);
      return;
    }
    // The job's id survives a takeover: the process taking over a dead one's job takes its
    // lease too, and resumes its run.
    const r = await this.runLeased(repo, n, `job ${job.id}`, {
      dryRun: false,
      insureFills: true,
      signal: job.signal,
      cause: "schedule",
    });
    if ("busy" in r) {
      // Another process runs it, or one that died holds the lease until it runs out.
      await this.enqueue(repo, n, Date.now() + this.leaseMs / 2);
      return;
    }
    const rec = r.record;
    log.info("sync run finished", {
      repository: repo,
      sync: n,
      outcome: rec.outcome,
      tags_fetched: rec.tags_fetched,
      tags_unchanged: rec.tags_unchanged,
      tags_pruned: rec.tags_pruned,
      blobs_fetched: rec.blobs_fetched,
      errors: rec.errors.length,
    });
    await this.enqueue(repo, n, rec.next_at ?? Date.now());
  }

  /** `main.ts sync`: runs one entry now, whatever its schedule. */
  runNow(
    repository: string,
    n: number,
    holder: string,
    opts: {
      dryRun: boolean;
      report?: (line: string) => void;
      progress?: ProgressSink;
      signal?: AbortSignal;
    },
  ): Promise<RunResult> {
    return this.runLeased(repository, n, holder, {
      dryRun: opts.dryRun,
      insureFills: false,
      signal: opts.signal ?? new AbortController().signal,
      report: opts.report,
      progress: opts.progress,
      cause: "sync command",
    });
  }

  private async runLeased(
    repo: string,
    n: number,
    holder: string,
    opts: {
      dryRun: boolean;
      insureFills: boolean;
      signal: AbortSignal;
      report?: (l: string) => void;
      progress?: ProgressSink;
      cause: string;
    },
  ): Promise<RunResult> {
    const rc = this.cfg.repositories.get(repo);
    const sync = rc?.syncs?.[n];
    if (!rc || !sync) throw new Error(`repository ${repo} has no sync #${n}`);
    const took = await this.state.lease(repo, holder, this.leaseMs);
    if (!took.ok) return { busy: took.held.holder };
    return await holdWhileRunning(took.lease, async (signal) => {
      const resume = opts.dryRun ? null : await this.state.inProgress(repo, n);
      if (resume) {
        log.info("sync run resumes", {
          repository: repo,
          sync: n,
          cursor: JSON.stringify(resume.cursor),
        });
      }
      const run = new SyncRun(this.cfg, this.deps, rc, n, sync, resume, { ...opts, signal });
      try {
        return { record: await run.run() };
      } catch (e) {
        if (signal.aborted) throw e; // stopped or lease lost: the record stays to resume
        // Anything else (a KV failure, a bug) ends the run with its error; the schedule goes on.
        const rec = run.fail(e);
        if (!opts.dryRun) await this.state.finish(repo, n, rec);
        return { record: rec };
      }
    }, { signal: opts.signal, name: "sync" });
  }
}
