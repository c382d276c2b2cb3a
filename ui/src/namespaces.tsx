// `/{repository}`: the namespaces of one repository with their tag, manifest and upload counts. A
// configured repository that holds nothing yet (the namespaces listing answers 404 for it, as for
// an unknown one) says so and how it fills, instead of "not found".
import { useEffect, useState } from "preact/hooks";
import { ApiError, getJson, type NamespacesListing } from "./api.ts";
import { PageError } from "./not_found.tsx";
import type { KnownRepository } from "./repos.ts";
import { Loading } from "./states.tsx";

export function Namespaces(
  { repository, known }: { repository: string; known?: KnownRepository },
) {
  const [listing, setListing] = useState<NamespacesListing | null>(null);
  const [error, setError] = useState<unknown>(null);
  const load = () => {
    setError(null);
    getJson<NamespacesListing>(
      `/v2/_svc/namespaces/list?repository=${encodeURIComponent(repository)}`,
    ).then(setListing).catch(setError);
  };
  useEffect(load, [repository]);
  if (
    error && known?.empty && error instanceof ApiError && error.status === 404
  ) {
    return <EmptyRepository repository={known} />;
  }
  if (error) return <PageError error={error} retry={load} />;
  if (!listing) return <Loading />;
  return (
    <section aria-labelledby="ns-title">
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href="/">Repositories</a> / <span>{repository}</span>
      </nav>
      <h1 id="ns-title">{repository}</h1>
      {listing.pull_through_cache && (
        <p class="muted">
          Pull-through cache of {listing.upstream_urls.join(", ")}
        </p>
      )}
      <table class="list">
        <thead>
          <tr>
            <th scope="col">Namespace</th>
            <th scope="col">Tags</th>
            <th scope="col">Manifests</th>
            <th scope="col">Uploads</th>
          </tr>
        </thead>
        <tbody>
          {listing.namespaces.map((n) => (
            <tr key={n.name} data-namespace={n.name}>
              <td>
                <a href={`/${n.name}`}>{n.name}</a>
              </td>
              <td class="num">{n.tag_count}</td>
              <td class="num">{n.manifest_count}</td>
              <td class="num">{n.upload_count}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

/** How a configured repository that holds nothing yet fills. */
export function emptyNote(r: KnownRepository): string {
  return r.pull_through_cache
    ? `Nothing cached yet: the first pull of an image under ${r.name}/ fetches it from the upstream.`
    : `Nothing pushed yet: push an image under ${r.name}/ to begin.`;
}

function EmptyRepository({ repository: r }: { repository: KnownRepository }) {
  return (
    <section aria-labelledby="ns-title" data-empty-repository={r.name}>
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href="/">Repositories</a> / <span>{r.name}</span>
      </nav>
      <h1 id="ns-title">{r.name}</h1>
      {r.pull_through_cache && (
        <p class="muted">Pull-through cache of {r.upstream_urls.join(", ")}</p>
      )}
      <p class="empty" role="status">{emptyNote(r)}</p>
    </section>
  );
}
