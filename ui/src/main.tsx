// The single-page app: a top bar (the registry's name from GET /v2/_svc/ui/config, navigation,
// theme, sign-in) and the view the location names (SPEC §Web UI routes; route.ts).
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { apiFetch, getJson, type UiConfig } from "./api.ts";
import { Audit } from "./audit.tsx";
import { completeSignIn, signedInAs, signIn, signOut } from "./auth.ts";
import { Compare } from "./compare.tsx";
import { setUiConfig, uiConfig } from "./config.ts";
import { ManifestDetails } from "./details/details.tsx";
import { useLoad } from "./hooks.ts";
import { ImageResults, TopImageSearch } from "./image_search.tsx";
import { Jobs } from "./jobs.tsx";
import { Manifests } from "./manifests.tsx";
import { Namespaces } from "./namespaces.tsx";
import { Replication } from "./replication.tsx";
import { knownRepositories } from "./repos.ts";
import { Repositories } from "./repositories.tsx";
import {
  AUDIT_PATH,
  installRouter,
  JOBS_PATH,
  navigate,
  onLocationChange,
  parseRoute,
  REPLICATION_PATH,
  type Route,
  SEARCH_PATH,
} from "./route.ts";
import { Search } from "./search.tsx";
import { PageError } from "./not_found.tsx";
import { ErrorState, Loading } from "./states.tsx";
import { applyTheme, savedTheme, ThemePicker } from "./theme.tsx";
import "./style.css";

/**
 * A repository's namespace list, or a namespace's manifests: the repositories listing tells, and
 * the configuration for a repository that holds nothing yet.
 */
function ByName({ name }: { name: string }) {
  const { data, error, reload } = useLoad(knownRepositories, []);
  if (error) return <PageError error={error} retry={reload} />;
  if (!data) return <Loading />;
  const repo = data.find((r) => r.name === name);
  return repo ? <Namespaces repository={name} known={repo} /> : <Manifests namespace={name} />;
}

/**
 * SPEC's `/jobs[/{queue}]`: a repository named `jobs` wins (its pages must stay reachable); the
 * queues are always at `/_jobs/{queue}`, where the top bar links.
 */
function JobsOrName({ queue, name }: { queue: string; name: string }) {
  const { data, error } = useLoad(knownRepositories, []);
  // A caller who may not list repositories still reaches the queues.
  if (error) return <Jobs key={queue} queue={queue} />;
  if (!data) return <Loading />;
  return data.some((r) => r.name === "jobs")
    ? <ByName key={name} name={name} />
    : <Jobs key={queue} queue={queue} />;
}

function SignedIn() {
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    if (!uiConfig.oidc) {
      setError(new Error("this registry's web UI has no sign-in configured"));
      return;
    }
    completeSignIn(uiConfig.oidc).then((to) => navigate(to, true)).catch(
      setError,
    );
  }, []);
  return error ? <ErrorState error={error} /> : <Loading text="Signing in…" />;
}

function View({ route }: { route: Route }) {
  switch (route.view) {
    case "repositories":
      return <Repositories />;
    case "name":
      return <ByName key={route.name} name={route.name} />;
    case "manifest":
      return (
        <ManifestDetails
          key={`${route.namespace}/${route.reference}`}
          namespace={route.namespace}
          reference={route.reference}
        />
      );
    case "jobs":
      return <Jobs key={route.queue} queue={route.queue} />;
    case "jobs-or-name":
      return <JobsOrName key={route.name} queue={route.queue} name={route.name} />;
    case "search":
      return <Search key={location.search} />;
    case "images":
      return <ImageResults key={location.search} />;
    case "replication":
      return <Replication />;
    case "audit":
      return <Audit key={location.search} />;
    case "compare":
      return (
        <Compare
          key={route.namespace + location.search}
          namespace={route.namespace}
        />
      );
    case "signed-in":
      return <SignedIn />;
  }
}

function Account() {
  const [who, setWho] = useState(signedInAs());
  if (!uiConfig.oidc) return null;
  return who
    ? (
      <span class="account">
        <span data-user={who}>{who}</span>{" "}
        <button
          type="button"
          onClick={() => {
            signOut();
            setWho(null);
            navigate(location.pathname, true);
          }}
        >
          Sign out
        </button>
      </span>
    )
    : (
      <button
        type="button"
        onClick={() => signIn(uiConfig.oidc!).catch((e) => alert(String(e)))}
      >
        Sign in
      </button>
    );
}

/** Shown when the audit trail is on and readable by the caller (a one-record probe says). */
function AuditLink({ current }: { current: boolean }) {
  const [shown, setShown] = useState(false);
  useEffect(() => {
    apiFetch("/v2/_svc/audit?n=0").then((r) => {
      r.body?.cancel();
      setShown(r.ok);
    }).catch(() => {});
  }, []);
  if (!shown && !current) return null;
  return (
    <a href={AUDIT_PATH} aria-current={current ? "page" : undefined}>
      Audit
    </a>
  );
}

function App({ ready }: { ready: boolean }) {
  // the query is part of a view's address (search, compare); the hash is read by the view itself
  const [path, setPath] = useState(location.pathname + location.search);
  useEffect(
    () => onLocationChange(() => setPath(location.pathname + location.search)),
    [],
  );
  const route = parseRoute(location.pathname);
  return (
    <>
      <a class="skip" href="#main">Skip to content</a>
      <header class="top">
        <a class="brand" href="/">{uiConfig.name}</a>
        <nav aria-label="Main">
          <a
            href="/"
            aria-current={route.view === "repositories" ? "page" : undefined}
          >
            Repositories
          </a>
          <a
            href={SEARCH_PATH}
            aria-current={route.view === "search" ? "page" : undefined}
          >
            Search files
          </a>
          <a
            href={JOBS_PATH}
            aria-current={route.view === "jobs" ? "page" : undefined}
          >
            Jobs
          </a>
          <a
            href={REPLICATION_PATH}
            aria-current={route.view === "replication" ? "page" : undefined}
          >
            Replication
          </a>
          {ready && <AuditLink current={route.view === "audit"} />}
        </nav>
        <span class="spacer"></span>
        {ready && <TopImageSearch />}
        <ThemePicker />
        {ready && <Account key={path} />}
      </header>
      <main id="main" tabIndex={-1}>
        {ready ? <View route={route} /> : <Loading />}
      </main>
    </>
  );
}

applyTheme(savedTheme());
installRouter();
const root = document.getElementById("app")!;
render(<App ready={false} />, root);
getJson<UiConfig>("/v2/_svc/ui/config").then((c) => setUiConfig(c)).catch(
  () => {
    // the name stays the default; views report their own errors
  },
).finally(() => {
  document.title = uiConfig.name;
  render(<App ready />, root);
});
