// `/`: the repository list, hosted repositories first, then pull-through caches (SPEC §Web UI
// routes), each with its upstream, immutable badge and namespace count, and a badge when one of
// its downstreams is failing or lagging (linking the replication page), and, when quotas or cache
// caps are configured, a bar of the storage each uses against its limit (issue 26). Rows are
// rendered a window at a time (a registry can hold thousands); the filter covers every repository.
// Configured repositories that hold nothing yet (a cache before its first pull, a repository with
// only a quota) are listed too, saying how they fill (repos.ts).
import { useMemo, useState } from "preact/hooks";
import { type DownstreamStatus, getJson, type ReplicationStatus } from "./api.ts";
import { useLoad } from "./hooks.ts";
import { emptyNote } from "./namespaces.tsx";
import { humanSize } from "./oci.ts";
import { HealthBadge } from "./replication.tsx";
import { knownRepositories, type KnownRepository } from "./repos.ts";
import { REPLICATION_PATH } from "./route.ts";
import { ErrorState, Loading } from "./states.tsx";

/** Repository → its worst downstream health; empty when the status cannot be read (denied). */
function useReplicationHealth(): Map<string, DownstreamStatus["health"]> {
  const { data } = useLoad(
    () =>
      getJson<ReplicationStatus>("/v2/_svc/replication/status").then((s) => s.downstreams)
        .catch(() => []),
    [],
  );
  return useMemo(() => {
    const rank = { ok: 0, lagging: 1, failing: 2 };
    const m = new Map<string, DownstreamStatus["health"]>();
    for (const d of data ?? []) {
      const was = m.get(d.repository) ?? "ok";
      if (rank[d.health] > rank[was]) m.set(d.repository, d.health);
    }
    return m;
  }, [data]);
}

const WINDOW = 200;

/** The storage fields are present only when quotas or cache caps are configured. */
type Row = KnownRepository;

/** Used bytes against the quota (or cache cap): a meter, warning from 90 %, and the numbers. */
function StorageBar({ r }: { r: Row }) {
  const used = r.used_bytes ?? 0;
  const limit = r.quota_bytes ?? r.max_cache_bytes ?? null;
  const label = limit === null
    ? `${humanSize(used)} used, no limit`
    : `${humanSize(used)} of ${humanSize(limit)}${r.quota_bytes == null ? " cache" : ""}`;
  return (
    <span class="storage" data-used={used} data-limit={limit ?? ""}>
      {limit !== null && (
        <meter
          min={0}
          max={Math.max(limit, 1)}
          value={Math.min(used, Math.max(limit, 1))}
          high={limit * 0.9}
          optimum={0}
          aria-label={`${r.name} storage`}
        />
      )} <span class="muted">{label}</span>
    </span>
  );
}

export function Repositories() {
  const { data, error, reload } = useLoad(knownRepositories, []);
  const health = useReplicationHealth();
  const [filter, setFilter] = useState("");
  const [limit, setLimit] = useState(WINDOW);
  const sorted = useMemo(() => {
    const f = filter.trim().toLowerCase();
    return (data ?? []).filter((r) =>
      !f || r.name.includes(f) || r.upstream_urls.some((u) => u.toLowerCase().includes(f))
    ).sort((a, b) =>
      Number(a.pull_through_cache) - Number(b.pull_through_cache) ||
      (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
    );
  }, [data, filter]);
  if (error) return <ErrorState error={error} retry={reload} />;
  if (!data) return <Loading />;
  const storage = data.some((r) => r.used_bytes !== undefined);
  return (
    <section aria-labelledby="repos-title">
      <h1 id="repos-title">Repositories</h1>
      {data.length === 0 ? <p>No repositories yet: push an image to begin.</p> : (
        <>
          <div class="tools">
            <label>
              Filter{" "}
              <input
                type="search"
                value={filter}
                placeholder="name or upstream"
                onInput={(e) => {
                  setFilter((e.target as HTMLInputElement).value);
                  setLimit(WINDOW);
                }}
              />
            </label>
            <span class="muted" data-count>{sorted.length} of {data.length}</span>
          </div>
          <table class="list">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Kind</th>
                <th scope="col">Upstream</th>
                <th scope="col">Namespaces</th>
                {storage && <th scope="col">Storage</th>}
              </tr>
            </thead>
            <tbody>
              {sorted.slice(0, limit).map((r) => (
                <tr
                  key={r.name}
                  data-repository={r.name}
                  data-empty={r.empty ? "" : undefined}
                >
                  <td>
                    <a href={`/${r.name}`}>{r.name}</a>
                    {r.immutable_tags && <span class="badge">immutable</span>}
                    {r.empty && <span class="badge">empty</span>}
                    {health.has(r.name) && (
                      <a href={REPLICATION_PATH}>
                        <HealthBadge health={health.get(r.name)!} />
                      </a>
                    )}
                    {r.empty && <span class="repo-note muted">{emptyNote(r)}</span>}
                  </td>
                  <td>{r.pull_through_cache ? "pull-through cache" : "hosted"}</td>
                  <td>{r.upstream_urls.join(", ")}</td>
                  <td class="num">{r.namespace_count}</td>
                  {storage && (
                    <td>
                      <StorageBar r={r} />
                    </td>
                  )}
                </tr>
              ))}
            </tbody>
          </table>
          {sorted.length > limit && (
            <button type="button" onClick={() => setLimit(limit + WINDOW)}>
              Show {Math.min(WINDOW, sorted.length - limit)} more of {sorted.length - limit}
            </button>
          )}
        </>
      )}
    </section>
  );
}
