// `/`: the repository list, hosted repositories first, then pull-through caches (SPEC §Web UI
// routes), each with its upstream, immutable badge and namespace count.
import { useEffect, useState } from "preact/hooks";
import { getJson, type RepositorySummary } from "./api.ts";
import { ErrorState, Loading } from "./states.tsx";

export function Repositories() {
  const [repos, setRepos] = useState<RepositorySummary[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const load = () => {
    setError(null);
    getJson<{ repositories: RepositorySummary[] }>("/v2/_svc/repositories/list")
      .then((b) => setRepos(b.repositories))
      .catch(setError);
  };
  useEffect(load, []);
  if (error) return <ErrorState error={error} retry={load} />;
  if (!repos) return <Loading />;
  const sorted = [...repos].sort((a, b) =>
    Number(a.pull_through_cache) - Number(b.pull_through_cache) ||
    (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)
  );
  return (
    <section aria-labelledby="repos-title">
      <h1 id="repos-title">Repositories</h1>
      {sorted.length === 0
        ? <p>No repositories yet: push an image to begin.</p>
        : (
          <table class="list">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Kind</th>
                <th scope="col">Upstream</th>
                <th scope="col">Namespaces</th>
              </tr>
            </thead>
            <tbody>
              {sorted.map((r) => (
                <tr key={r.name} data-repository={r.name}>
                  <td>
                    <a href={`/${r.name}`}>{r.name}</a>
                    {r.immutable_tags && <span class="badge">immutable</span>}
                  </td>
                  <td>{r.pull_through_cache ? "pull-through cache" : "hosted"}</td>
                  <td>{r.upstream_urls.join(", ")}</td>
                  <td class="num">{r.namespace_count}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
    </section>
  );
}
