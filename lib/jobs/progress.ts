// Progress of long work. Two halves:
// - the callback a long lib/ function reports through (ProgressSink): the commands render it
//   (commands/progress.ts), lib/ never prints;
// - the KV record of a long run others should see (the UI's Jobs and Replication pages): a batch
//   of jobs (a reindex, a rescan: its jobs are counted by the queue in each one's completion
//   commit, one blind sum, no read) or a sync run (which writes its own counts). A record is
//   written when the run starts, at most every WRITE_EVERY_MS while it moves and when it ends:
//   never on a request's path. The newest KEEP_PER_KIND runs of each kind are kept.
import type { QueueName } from "../config/mod.ts";
import { K } from "../kv/mod.ts";
import { log } from "../log.ts";
import { isStorageKey, type JobBatch, storageKey } from "./record.ts";

/** One step of long work, as a lib/ function reports it (often: the sink throttles). */
export interface ProgressUpdate {
  /** what `done` and `total` count: "namespaces", "blobs", "tags", "ecosystems" */
  unit: string;
  /** the step of a run made of several (scrub's "references", "reclaim", …) */
  phase?: string;
  done: number;
  /** null while unknown (a walk not finished) */
  total: number | null;
  /** bytes moved so far, where bytes move */
  bytes?: number;
  /** bytes to move in all, when known */
  bytesTotal?: number | null;
  /** other figures worth a glance, e.g. "120 layer(s), 56 queued" */
  note?: string;
}

export type ProgressSink = (u: ProgressUpdate) => void;

/** Long server-side runs with a record, and the queue whose jobs do (or run) them. */
export const RUN_QUEUE = {
  reindex: "index",
  rescan: "scan",
  sync: "cache",
} as const satisfies Record<string, QueueName>;
export type RunKind = keyof typeof RUN_QUEUE & JobBatch["kind"];

export function isRunKind(s: unknown): s is RunKind {
  return typeof s === "string" && Object.hasOwn(RUN_QUEUE, s);
}

/** A stored batch field that can be counted (a record is data: check its shape). */
export function validBatch(b: unknown): JobBatch | null {
  if (!b || typeof b !== "object") return null;
  const { kind, key } = b as Record<string, unknown>;
  return isRunKind(kind) && typeof key === "string" && isStorageKey(key) ? { kind, key } : null;
}

/** KvU64 sums wrap: adding 2^64 − 1 takes one away. */
const MINUS_ONE = (1n << 64n) - 1n;

/**
 * Counts a job of `batch` in a commit that settles it: "done" (it completed, or a newer job or
 * an admin took it away) or "failed" (dead-lettered); `undo` takes a failure back (a retry).
 * One mutation, no check.
 */
export function countBatchJob(
  op: Deno.AtomicOperation,
  batch: unknown,
  which: "done" | "failed",
  undo = false,
): void {
  const b = validBatch(batch);
  if (b) op.sum(K.progressCount(b.kind, b.key, which), undo ? MINUS_ONE : 1n);
}

/** A run's stored record (< 2 KiB: labels are cut). */
export interface RunRecord {
  kind: RunKind;
  /** what it covers: "every namespace", "namespace team/app", "team#0 (library/alpine)" */
  label: string;
  /** why it runs: "reindex command", "advisories loaded (snapshot …)", "schedule" */
  cause: string;
  started_at: number;
  updated_at: number;
  /** a batch: when its walk had queued every job; a sync run: when it ended */
  finished_at: number | null;
  /** a batch: the jobs it queued, once its walk ended; a sync run: tags to check, once known */
  total: number | null;
  /** a sync run: tags checked (a batch's jobs are counted apart) */
  done: number;
  /** a batch: jobs queued so far */
  queued: number;
  /** a sync run: tags that failed */
  failed: number;
  bytes: number;
  /** a sync run's outcome once it ended ("ok", "partial", "failed", "rate-limited") */
  outcome: string | null;
}

/** What the progress endpoint and the sync status answer per run. */
export interface RunView {
  id: string;
  kind: RunKind;
  queue: QueueName;
  label: string;
  cause: string;
  /**
   * queuing: a batch's walk is still queuing jobs (total unknown); running; done; stalled: no
   * word from it for STALL_MS while it should be moving (its process died)
   */
  state: "queuing" | "running" | "done" | "stalled";
  /** jobs or tags done; failed ones are counted in `failed`, not here */
  done: number;
  failed: number;
  total: number | null;
  /** a batch: jobs queued so far */
  queued: number;
  bytes: number;
  outcome: string | null;
  started_at: string;
  updated_at: string;
  finished_at: string | null;
}

/** Record writes while a run moves: at most one per this. */
export const WRITE_EVERY_MS = 2_000;
/** A run that moves writes at least this often (a heartbeat while a long step runs). */
const HEARTBEAT_MS = 30_000;
/** No word from a run for this long: its process is gone. */
export const STALL_MS = 120_000;
/** Runs kept per kind; older ones are dropped when another starts. */
export const KEEP_PER_KIND = 20;
const MAX_LABEL = 300;

const cut = (s: string) => s.length > MAX_LABEL ? `${s.slice(0, MAX_LABEL)}…` : s;
const iso = (ms: number | null) => ms === null ? null : new Date(ms).toISOString();

/** A counter's value; one wrapped below zero (a failure taken back twice) reads 0. */
function count(v: unknown): number {
  if (!(v instanceof Deno.KvU64) || v.value >= 1n << 63n) return 0;
  return Number(v.value);
}

/** The runs' records in KV (keys.ts, progress/…). */
export class Runs {
  constructor(private readonly kv: Deno.Kv, private readonly now: () => number = Date.now) {}

  /**
   * Starts (or, with `resume`, goes on with) a run's record. Drops the oldest runs of the kind
   * past KEEP_PER_KIND. A KV failure here is logged, never the run's failure: the tracker then
   * writes nothing.
   */
  async start(
    kind: RunKind,
    label: string,
    cause: string,
    resume?: { id: string; startedAt: number },
  ): Promise<RunTracker> {
    const at = this.now();
    const key = storageKey(resume?.startedAt ?? at, resume?.id ?? crypto.randomUUID());
    const rec: RunRecord = {
      kind,
      label: cut(label),
      cause: cut(cause),
      started_at: resume?.startedAt ?? at,
      updated_at: at,
      finished_at: null,
      total: null,
      done: 0,
      queued: 0,
      failed: 0,
      bytes: 0,
      outcome: null,
    };
    const t = new RunTracker(this.kv, { kind, key }, rec, this.now);
    try {
      if (resume) {
        const old = (await this.kv.get<RunRecord>(K.progress(kind, key))).value;
        if (old) Object.assign(rec, { ...old, updated_at: at, finished_at: null, outcome: null });
      }
      await this.kv.set(K.progress(kind, key), rec);
      await this.prune(kind);
    } catch (e) {
      log.warn("progress record not written", { kind, error: String(e) });
    }
    return t;
  }

  /** Runs of the kinds whose work is `queue`'s, newest first (at most KEEP_PER_KIND each). */
  async list(queue: QueueName): Promise<RunView[]> {
    const kinds = (Object.keys(RUN_QUEUE) as RunKind[]).filter((k) => RUN_QUEUE[k] === queue);
    const out: RunView[] = [];
    for (const kind of kinds) {
      for (const g of await this.groups(kind, KEEP_PER_KIND)) {
        if (g.record) out.push(this.view(kind, g.key, g.record, g.done, g.failed));
      }
    }
    return out.sort((a, b) => b.started_at.localeCompare(a.started_at));
  }

  /** One run's view (a sync in progress, for its status row); null when it has no record. */
  async get(kind: RunKind, id: string, startedAt: number): Promise<RunView | null> {
    const key = storageKey(startedAt, id);
    const [r, d, f] = await this.kv.getMany<[RunRecord, Deno.KvU64, Deno.KvU64]>([
      K.progress(kind, key),
      K.progressCount(kind, key, "done"),
      K.progressCount(kind, key, "failed"),
    ]);
    return r.value ? this.view(kind, key, r.value, count(d.value), count(f.value)) : null;
  }

  private view(
    kind: RunKind,
    key: string,
    r: RunRecord,
    jobsDone: number,
    jobsFailed: number,
  ): RunView {
    const batch = kind !== "sync";
    const total = r.total;
    // A retried job that then succeeds is counted in both until its failure is taken back.
    const failed = batch ? Math.min(jobsFailed, total ?? jobsFailed) : r.failed;
    const done = batch ? Math.min(jobsDone, Math.max(0, (total ?? Infinity) - failed)) : r.done;
    const silent = this.now() - r.updated_at > STALL_MS;
    const state: RunView["state"] = batch
      ? r.finished_at === null
        ? silent ? "stalled" : "queuing"
        : done + failed >= (total ?? 0)
        ? "done"
        : "running"
      : r.finished_at !== null
      ? "done"
      : silent
      ? "stalled"
      : "running";
    return {
      id: key,
      kind,
      queue: RUN_QUEUE[kind],
      label: r.label,
      cause: r.cause,
      state,
      done,
      failed,
      total,
      queued: r.queued,
      bytes: r.bytes,
      outcome: r.outcome,
      started_at: iso(r.started_at)!,
      updated_at: iso(r.updated_at)!,
      finished_at: iso(r.finished_at),
    };
  }

  /** The newest `limit` runs of a kind (record and counters), read newest first. */
  private async groups(kind: RunKind, limit: number) {
    const out: { key: string; record: RunRecord | null; done: number; failed: number }[] = [];
    // Each run is at most three keys: its record and two counters.
    for await (
      const e of this.kv.list({ prefix: K.progressOf(kind) }, {
        reverse: true,
        limit: (limit + 1) * 3,
      })
    ) {
      const key = String(e.key[2]);
      let g = out[out.length - 1];
      if (!g || g.key !== key) {
        if (out.length === limit) break;
        g = { key, record: null, done: 0, failed: 0 };
        out.push(g);
      }
      const part = e.key[3];
      if (part === undefined) g.record = e.value as RunRecord;
      else if (part === "done") g.done = count(e.value);
      else if (part === "failed") g.failed = count(e.value);
    }
    return out;
  }

  /** Drops the runs of `kind` older than the newest KEEP_PER_KIND (a few per start at most). */
  private async prune(kind: RunKind): Promise<void> {
    const keys = new Set<string>();
    for await (
      const e of this.kv.list({ prefix: K.progressOf(kind) }, {
        reverse: true,
        limit: (KEEP_PER_KIND + 10) * 3,
      })
    ) keys.add(String(e.key[2]));
    const old = [...keys].slice(KEEP_PER_KIND);
    if (old.length === 0) return;
    const op = this.kv.atomic();
    for (const key of old) {
      op.delete(K.progress(kind, key)).delete(K.progressCount(kind, key, "done"))
        .delete(K.progressCount(kind, key, "failed"));
    }
    await op.commit();
  }
}

/**
 * One run's record, kept in memory and written at most every WRITE_EVERY_MS (and when it
 * ends). Writes are blind sets of one small value, chained so they land in order; a failed one
 * is logged and the run goes on.
 */
export class RunTracker {
  private lastWrite = 0;
  private writing: Promise<void> = Promise.resolve();
  private dirty = false;
  private readonly heartbeat: ReturnType<typeof setInterval>;

  constructor(
    private readonly kv: Deno.Kv,
    /** what its jobs carry (JobSpec.batch), for a batch */
    readonly batch: JobBatch,
    private readonly rec: RunRecord,
    private readonly now: () => number,
  ) {
    this.lastWrite = now();
    this.heartbeat = setInterval(() => {
      if (this.rec.finished_at === null) this.write();
    }, HEARTBEAT_MS);
    Deno.unrefTimer(this.heartbeat as unknown as number);
  }

  /** The run's id (the progress endpoint's `id`). */
  get id(): string {
    return this.batch.key;
  }

  /** Takes the run's figures; writes them when WRITE_EVERY_MS has passed since the last write. */
  update(fields: Partial<Pick<RunRecord, "total" | "done" | "queued" | "failed" | "bytes">>): void {
    Object.assign(this.rec, fields);
    this.dirty = true;
    if (this.now() - this.lastWrite >= WRITE_EVERY_MS) this.write();
  }

  /** The run ended (a batch: its walk queued everything): the last write, awaited. */
  async finish(
    fields: Partial<Pick<RunRecord, "total" | "done" | "queued" | "failed" | "bytes" | "outcome">>,
  ): Promise<void> {
    clearInterval(this.heartbeat);
    Object.assign(this.rec, fields, { finished_at: this.now() });
    this.write();
    await this.writing;
  }

  /** The run turned out to be nothing to show (a batch whose every job was pending already). */
  async discard(): Promise<void> {
    clearInterval(this.heartbeat);
    this.rec.finished_at = this.now();
    await this.writing;
    await this.kv.delete(K.progress(this.batch.kind, this.batch.key)).catch((e) =>
      log.warn("progress record not dropped", { run: this.batch.key, error: String(e) })
    );
  }

  /** Stops the heartbeat without a last write (the run stopped; its record says where). */
  async stop(): Promise<void> {
    clearInterval(this.heartbeat);
    if (this.dirty && this.rec.finished_at === null) this.write();
    await this.writing;
  }

  private write(): void {
    this.lastWrite = this.now();
    this.dirty = false;
    this.rec.updated_at = this.lastWrite;
    const value = { ...this.rec };
    const key = K.progress(this.batch.kind, this.batch.key);
    this.writing = this.writing.then(() => this.kv.set(key, value)).then(
      () => {},
      (e) => log.warn("progress record not written", { run: this.batch.key, error: String(e) }),
    );
  }
}
