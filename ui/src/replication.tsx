// `/_replication`: per downstream of each repository, whether it is in step (pending jobs, lag,
// failed jobs, last success, last error, outcomes, what it supports), and per scheduled pull sync
// its last run and the progress of the one running; from GET /v2/_svc/replication/status,
// refreshed every few seconds.
import { type DownstreamStatus, getJson, type ReplicationStatus } from "./api.ts";
import { useInterval, useLoad } from "./hooks.ts";
import { JOBS_PATH } from "./route.ts";
import { ErrorState, Loading } from "./states.tsx";
import { RunBar, type RunProgress } from "./progress.tsx";

/** The badge of a downstream's health; null when it is in step. */
export function HealthBadge(
  { health }: { health: DownstreamStatus["health"] },
) {
  if (health === "ok") return null;
  return (
    <span
      class={`badge sev ${health === "failing" ? "sev-high" : "sev-medium"}`}
      data-health={health}
    >
      {health === "failing" ? "replication failing" : "replication lagging"}
    </span>
  );
}

function when(iso: string | null): string {
  return iso === null ? "never" : new Date(iso).toLocaleString();
}

function lag(secs: number): string {
  if (secs === 0) return "none";
  if (secs < 120) return `${Math.round(secs)} s`;
  if (secs < 7200) return `${Math.round(secs / 60)} min`;
  return `${Math.round(secs / 3600)} h`;
}

function can(v: boolean | null): string {
  return v === null ? "not seen yet" : v ? "yes" : "no";
}

function Downstream({ d }: { d: DownstreamStatus }) {
  const o = d.outcomes;
  return (
    <tr data-downstream={d.name} data-health={d.health}>
      <td>
        <strong>{d.name}</strong> <HealthBadge health={d.health} />
        <div class="muted">{d.url}</div>
        <div class="muted">
          <a href={`/${d.repository}`}>{d.repository}</a> · {d.mode}
          {d.prune ? " · prune" : ""}
        </div>
      </td>
      <td class="num" data-pending>{d.pending}</td>
      <td class="num" data-lag>{lag(d.oldest_pending_secs)}</td>
      <td class="num" data-failed>
        {d.failed > 0 ? <a href={`${JOBS_PATH}/replication`}>{d.failed}</a> : 0}
      </td>
      <td data-last-success>{when(d.last_success_at)}</td>
      <td data-last-error style={{ overflowWrap: "anywhere", minWidth: "16rem" }}>
        {d.last_error
          ? (
            <>
              <span class="badge">{d.last_error.outcome}</span>
              <span
                class={d.last_error.outcome === "failed" ? "error-text" : ""}
              >
                {d.last_error.message}
              </span>
              <div class="muted">{when(d.last_error.at)}</div>
            </>
          )
          : "none"}
      </td>
      <td data-outcomes>
        pushed {o.pushed ?? 0} · deleted {o.deleted ?? 0} · superseded {o.superseded ?? 0}{" "}
        · unsupported {o.unsupported ?? 0} · failed runs {o.failed ?? 0}
      </td>
      <td data-supports>
        tag delete: {can(d.supports.tag_delete)}
        <br />digest delete: {can(d.supports.digest_delete)}
      </td>
    </tr>
  );
}

function Syncs({ syncs }: { syncs: Record<string, unknown>[] }) {
  if (syncs.length === 0) {
    return <p class="muted">No scheduled pull syncs configured.</p>;
  }
  const keys = [...new Set(syncs.flatMap((s) => Object.keys(s)))];
  const cell = (v: unknown) =>
    v === null || v === undefined
      ? ""
      : Array.isArray(v)
      ? v.join(", ")
      : typeof v === "object"
      ? JSON.stringify(v)
      : String(v);
  return (
    // On a narrow screen the table scrolls in its box: a keyboard reaches it too.
    <table class="list" data-syncs tabIndex={0} aria-label="Scheduled pull syncs">
      <thead>
        <tr>
          {keys.map((k) => <th scope="col" key={k}>{k.replaceAll("_", " ")}</th>)}
        </tr>
      </thead>
      <tbody>
        {syncs.map((s, i) => (
          <tr key={i}>
            {keys.map((k) => (
              <td key={k} data-sync-field={k}>
                {/* A run in progress: tags checked of those to check, bytes fetched. */}
                {k === "progress" ? (s[k] ? <RunBar run={s[k] as RunProgress} /> : "") : cell(s[k])}
              </td>
            ))}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function Replication() {
  const { data, error, reload } = useLoad(
    () => getJson<ReplicationStatus>("/v2/_svc/replication/status"),
    [],
  );
  useInterval(reload, 5000);
  if (error && !data) return <ErrorState error={error} retry={reload} />;
  if (!data) return <Loading />;
  return (
    <section aria-labelledby="replication-title">
      <h1 id="replication-title">Replication</h1>
      <h2>Downstreams</h2>
      {data.downstreams.length === 0
        ? <p class="muted">No downstreams configured.</p>
        : (
          <table class="list" data-downstreams tabIndex={0} aria-label="Downstreams">
            <thead>
              <tr>
                <th scope="col">Downstream</th>
                <th scope="col">Pending</th>
                <th scope="col">Lag</th>
                <th scope="col">Failed</th>
                <th scope="col">Last success</th>
                <th scope="col">Last error</th>
                <th scope="col">Job runs</th>
                <th scope="col">Supports</th>
              </tr>
            </thead>
            <tbody>
              {data.downstreams.map((d) => <Downstream key={d.name} d={d} />)}
            </tbody>
          </table>
        )}
      {data.truncated && (
        <p class="muted">
          More than 10,000 pending or failed jobs: counts stop there.
        </p>
      )}
      <h2>Scheduled pull syncs</h2>
      <Syncs syncs={data.syncs} />
    </section>
  );
}
