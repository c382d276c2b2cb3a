// Long server-side runs and their progress (issue 37 item 5): a reindex or rescan batch on the
// Jobs page of its queue (GET /v2/_svc/jobs/progress?queue=…), a sync run in its row of the
// Replication page (the sync status' `progress`). Each shows what it covers, done of total as a
// bar and in words, failures, and whether it still runs.
import { useEffect, useState } from "preact/hooks";
import { getJson } from "./api.ts";
import { useInterval } from "./hooks.ts";
import "./progress.css";

export interface RunProgress {
  id: string;
  kind: "reindex" | "rescan" | "sync";
  queue: string;
  label: string;
  cause: string;
  /** queuing: a batch still queues its jobs; stalled: no word from its process for minutes */
  state: "queuing" | "running" | "done" | "stalled";
  done: number;
  failed: number;
  total: number | null;
  queued: number;
  bytes: number;
  outcome: string | null;
  started_at: string;
  updated_at: string;
  finished_at: string | null;
}

const UNIT: Record<RunProgress["kind"], string> = {
  reindex: "jobs",
  rescan: "jobs",
  sync: "tags",
};

function bytesText(n: number): string {
  if (n < 1024) return `${n} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

const STATE_TEXT: Record<RunProgress["state"], string> = {
  queuing: "queuing",
  running: "running",
  done: "done",
  stalled: "stalled: no word from it for minutes (its process stopped?)",
};

/** The bar: done (and failed) of total; striped while the total is not known yet. */
export function RunBar({ run }: { run: RunProgress }) {
  const unit = UNIT[run.kind];
  const of = run.total ?? (run.kind === "sync" ? null : run.queued);
  const settled = run.done + run.failed;
  const pct = (n: number) => of ? `${Math.min(100, (100 * n) / of)}%` : "0%";
  const words = `${run.done}${run.total === null ? "" : ` of ${run.total}`} ${unit} done${
    run.total === null && run.kind !== "sync" ? ` (${run.queued} queued so far)` : ""
  }`;
  return (
    <div class="run-progress" data-run-state={run.state}>
      <div
        class={`run-bar${run.total === null ? " unknown" : ""}`}
        role="progressbar"
        aria-label={`${run.label}: ${words}`}
        aria-valuemin={0}
        aria-valuemax={run.total ?? undefined}
        aria-valuenow={run.total === null ? undefined : settled}
      >
        <span class="run-done" style={{ width: pct(run.done) }}></span>
        <span class="run-failed" style={{ width: pct(run.failed) }}></span>
      </div>
      <p class="run-figures" data-run-figures>
        {words}
        {run.failed > 0 && <span class="error-text">{` · ${run.failed} failed`}</span>}
        {run.bytes > 0 && ` · ${bytesText(run.bytes)}`}
        {` · ${run.outcome ?? STATE_TEXT[run.state]}`}
      </p>
    </div>
  );
}

/** The long runs whose work is `queue`'s, newest first; nothing at all when there are none. */
export function LongRuns({ queue, auto }: { queue: string; auto: boolean }) {
  const [runs, setRuns] = useState<RunProgress[] | null>(null);
  const load = () =>
    getJson<{ runs: RunProgress[] }>(
      `/v2/_svc/jobs/progress?queue=${encodeURIComponent(queue)}`,
    )
      .then((b) => setRuns(b.runs))
      // A caller who may not list this queue's jobs sees the jobs' own answer below.
      .catch(() => setRuns(null));
  useEffect(() => {
    setRuns(null);
    load();
  }, [queue]);
  useInterval(load, 3000, auto);
  if (!runs || runs.length === 0) return null;
  return (
    <section class="long-runs" aria-labelledby="long-runs-title">
      <h2 id="long-runs-title">Long runs</h2>
      <ul class="runs">
        {runs.map((r) => (
          <li key={r.id} data-run={r.kind} data-run-id={r.id}>
            <div class="run-head">
              <strong class="run-label">{r.label}</strong>
              <span class="muted">
                {r.cause} · started {new Date(r.started_at).toLocaleString()}
              </span>
            </div>
            <RunBar run={r} />
          </li>
        ))}
      </ul>
    </section>
  );
}
