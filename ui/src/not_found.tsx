// A page-level 404: the breadcrumbs of the address asked for, the server's reason and the ways
// back (the nearest level that may exist), instead of a bare message with nowhere to go.
import { ApiError } from "./api.ts";
import { JOBS_PATH, parseRoute, QUEUES } from "./route.ts";
import { ErrorState } from "./states.tsx";

/** Each level above the address: the repository, then every namespace prefix. */
function levels(name: string): { label: string; href: string }[] {
  const parts = name.split("/");
  return parts.map((_, i) => {
    const prefix = parts.slice(0, i + 1).join("/");
    return { label: prefix, href: "/" + prefix };
  });
}

export function NotFound({ reason }: { reason?: string }) {
  const route = parseRoute(location.pathname);
  const name = route.view === "manifest"
    ? route.namespace
    : route.view === "name" || route.view === "jobs-or-name"
    ? route.name
    : "";
  const up = name ? levels(name) : [];
  const ref = route.view === "manifest" ? route.reference : null;
  const queue = name.startsWith("jobs/") && QUEUES.includes(name.slice(5)) ? name.slice(5) : null;
  return (
    <section aria-labelledby="nf-title" data-not-found>
      <nav class="crumbs" aria-label="Breadcrumb">
        <a href="/">Repositories</a>
        {up.map((l, i) => (
          <span key={l.href}>
            {" / "}
            {i === up.length - 1 && !ref ? <span>{l.label}</span> : <a href={l.href}>{l.label}</a>}
          </span>
        ))}
        {ref && <span>/ {ref}</span>}
      </nav>
      <h1 id="nf-title">Not found</h1>
      <p role="alert" data-status="404">
        Not found:{" "}
        {ref ? `${name}${ref.includes(":") ? "@" : ":"}${ref}` : name || location.pathname}{" "}
        does not exist, or you may not see it.
      </p>
      {reason && <p class="muted" data-reason>The registry said: {reason}</p>}
      <ul class="ways-back">
        {ref && (
          <li>
            <a href={`/${name}`}>All manifests of {name}</a>
          </li>
        )}
        {up.length > 1 && !ref && (
          <li>
            <a href={up[up.length - 2].href}>Up to {up[up.length - 2].label}</a>
          </li>
        )}
        {queue && (
          <li>
            <a href={`${JOBS_PATH}/${queue}`}>The {queue} job queue</a>
          </li>
        )}
        <li>
          <a href="/">All repositories</a>
        </li>
      </ul>
    </section>
  );
}

/** A view's load error: a 404 becomes the not-found page, anything else the usual state. */
export function PageError(
  { error, retry }: { error: unknown; retry?: () => void },
) {
  if (error instanceof ApiError && error.status === 404) {
    return <NotFound reason={error.detail || error.message} />;
  }
  return <ErrorState error={error} retry={retry} />;
}
