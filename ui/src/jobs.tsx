// `/_jobs/{queue}` (and SPEC's `/jobs/{queue}` while no repository is named `jobs`): the pending
// and failed jobs of one queue (no queue opens `cache`), with retry, delete (two clicks), load
// more and auto-refresh. The tables keep their columns in the page: a long subject or error wraps
// in its column, an error past three lines folds (all of it on hover or "Show all"), and the row
// actions stay in view; on a narrow screen each job is a block of labelled lines. Above them, the
// queue's long runs (a reindex, a rescan, a sync run) with done of total (progress.tsx).
import { useEffect, useState } from "preact/hooks";
import { apiFetch, checked, getJson } from "./api.ts";
import { DeleteButton } from "./buttons.tsx";
import { useInterval } from "./hooks.ts";
import { JOBS_PATH, QUEUES } from "./route.ts";
import { ErrorState, Loading } from "./states.tsx";
import { LongRuns } from "./progress.tsx";

interface Job {
  storage_key: string;
  id: string;
  kind: string;
  lock_key: string;
  attempts: number;
  max_attempts: number;
  created_at: string;
  not_before?: string;
  failed_at?: string;
  last_error?: string;
}

type Which = "pending" | "failed";

interface ListState {
  items: Job[];
  next: string | null;
  error: unknown;
  loaded: boolean;
}

const EMPTY: ListState = { items: [], next: null, error: null, loaded: false };

function useJobList(queue: string, which: Which) {
  const [state, setState] = useState<ListState>(EMPTY);
  const path = which === "pending" ? "/v2/_svc/jobs/list" : "/v2/_svc/jobs/failed";
  const field = which === "pending" ? "jobs" : "failed";
  // A refresh re-reads as many entries as are shown, so "load more" survives it.
  const refresh = async (count: number) => {
    try {
      const b = await getJson<Record<string, unknown>>(
        `${path}?queue=${queue}&n=${Math.max(100, Math.ceil(count / 100) * 100)}`,
      );
      setState({
        items: (b[field] as Job[]) ?? [],
        next: (b.next as string) ?? null,
        error: null,
        loaded: true,
      });
    } catch (e) {
      setState((s) => ({ ...s, error: e, loaded: true }));
    }
  };
  const more = async () => {
    try {
      const b = await getJson<Record<string, unknown>>(
        `${path}?queue=${queue}&n=100&after=${encodeURIComponent(state.next!)}`,
      );
      setState((s) => ({
        items: [...s.items, ...((b[field] as Job[]) ?? [])],
        next: (b.next as string) ?? null,
        error: null,
        loaded: true,
      }));
    } catch (e) {
      setState((s) => ({ ...s, error: e }));
    }
  };
  useEffect(() => {
    setState(EMPTY);
    refresh(100);
  }, [queue]);
  return { state, refresh: () => refresh(state.items.length), more };
}

async function mutate(
  method: string,
  which: Which,
  queue: string,
  key: string,
) {
  const r = await apiFetch(
    `/v2/_svc/jobs/${which}?queue=${queue}&key=${encodeURIComponent(key)}`,
    { method },
  );
  await checked(r);
  await r.body?.cancel();
}

/** Errors longer than this fold to three lines until asked for. */
const FOLD_AT = 240;

function LongText({ text }: { text: string }) {
  const [open, setOpen] = useState(false);
  const long = text.length > FOLD_AT || text.split("\n").length > 3;
  return (
    <div class={open || !long ? "long-text" : "long-text folded"}>
      <span class="long-text-body" title={long && !open ? text : undefined}>
        {text}
      </span>
      {long && (
        <button
          type="button"
          class="link"
          aria-expanded={open}
          onClick={() => setOpen(!open)}
        >
          {open ? "Show less" : "Show all"}
        </button>
      )}
    </div>
  );
}

function JobTable(
  { queue, which, list, onChange }: {
    queue: string;
    which: Which;
    list: ReturnType<typeof useJobList>;
    onChange: () => void;
  },
) {
  const { state, more } = list;
  const [actionError, setActionError] = useState<unknown>(null);
  if (!state.loaded) return <Loading />;
  if (state.error) {
    return <ErrorState error={state.error} retry={list.refresh} />;
  }
  const act = (method: string, w: Which, key: string) => async () => {
    try {
      setActionError(null);
      await mutate(method, w, queue, key);
    } catch (e) {
      setActionError(e);
    }
    onChange();
  };
  return (
    <>
      {actionError ? <ErrorState error={actionError} /> : null}
      {state.items.length === 0
        ? <p class="empty">No {which} jobs in the {queue} queue.</p>
        : (
          <table class="list jobs" data-jobs={which}>
            <colgroup>
              <col class="kind" />
              <col class={which === "failed" ? "subject" : undefined} />
              <col class="attempts" />
              <col class="time" />
              <col class="time" />
              {which === "failed" && <col />}
              <col class="row-actions" />
            </colgroup>
            <thead>
              <tr>
                <th scope="col">Kind</th>
                <th scope="col">Subject</th>
                <th scope="col">Attempts</th>
                <th scope="col">Created</th>
                <th scope="col">{which === "pending" ? "Due" : "Failed"}</th>
                {which === "failed" && <th scope="col">Last error</th>}
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {state.items.map((j) => (
                <tr key={j.storage_key} data-job={j.id}>
                  <td data-label="Kind">{j.kind}</td>
                  <td data-label="Subject">
                    <code>{j.lock_key}</code>
                  </td>
                  <td class="num" data-label="Attempts">
                    {j.attempts}/{j.max_attempts}
                  </td>
                  <td data-label="Created">
                    {new Date(j.created_at).toLocaleString()}
                  </td>
                  <td data-label={which === "pending" ? "Due" : "Failed"}>
                    {new Date(
                      (which === "pending" ? j.not_before : j.failed_at) ?? "",
                    )
                      .toLocaleString()}
                  </td>
                  {which === "failed" && (
                    <td class="error-text" data-label="Last error">
                      <LongText text={j.last_error ?? ""} />
                    </td>
                  )}
                  <td class="row-actions">
                    {which === "failed" && (
                      <button
                        type="button"
                        onClick={act("POST", "failed", j.storage_key)}
                      >
                        Retry
                      </button>
                    )}
                    <DeleteButton
                      label="Delete"
                      onConfirm={act("DELETE", which, j.storage_key)}
                    />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      {state.next && <button type="button" onClick={more}>Load more</button>}
    </>
  );
}

export function Jobs({ queue }: { queue: string }) {
  const pending = useJobList(queue, "pending");
  const failed = useJobList(queue, "failed");
  const [auto, setAuto] = useState(true);
  const refreshBoth = () => {
    pending.refresh();
    failed.refresh();
  };
  useInterval(refreshBoth, 3000, auto && QUEUES.includes(queue));
  if (!QUEUES.includes(queue)) {
    return (
      <section>
        <h1>Jobs</h1>
        <p role="alert">There is no job queue named “{queue}”.</p>
        <QueueNav queue={queue} />
      </section>
    );
  }
  return (
    <section aria-labelledby="jobs-title">
      <h1 id="jobs-title">Jobs: {queue}</h1>
      <QueueNav queue={queue} />
      <div class="tools">
        <label>
          <input
            type="checkbox"
            checked={auto}
            onChange={(e) => setAuto((e.target as HTMLInputElement).checked)}
          />{" "}
          Refresh every 3 s
        </label>
        <button type="button" onClick={refreshBoth}>Refresh now</button>
      </div>
      <LongRuns queue={queue} auto={auto} />
      <h2>Pending and running</h2>
      <JobTable
        queue={queue}
        which="pending"
        list={pending}
        onChange={refreshBoth}
      />
      <h2>Failed</h2>
      <JobTable
        queue={queue}
        which="failed"
        list={failed}
        onChange={refreshBoth}
      />
    </section>
  );
}

function QueueNav({ queue }: { queue: string }) {
  return (
    <nav class="tabs" aria-label="Job queues">
      {QUEUES.map((q) => (
        <a
          key={q}
          href={`${JOBS_PATH}/${q}`}
          aria-current={q === queue ? "page" : undefined}
        >
          {q}
        </a>
      ))}
    </nav>
  );
}
