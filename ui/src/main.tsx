// The single-page app: a top bar with the registry's name (GET /v2/_svc/ui/config) and the view
// the path names (SPEC §Web UI routes): `/` repositories, `/{repository}` its namespaces,
// `/{namespace}` its manifests (a namespace's name begins with its repository's). Manifest
// details and the jobs views are still to come; their paths say so.
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { getJson, type RepositorySummary, type UiConfig } from "./api.ts";
import { Repositories } from "./repositories.tsx";
import { Namespaces } from "./namespaces.tsx";
import { Manifests } from "./manifests.tsx";
import { ErrorState, Loading } from "./states.tsx";
import "./style.css";

/** A repository's namespace list, or a namespace's manifests: the repositories listing tells. */
function ByName({ name }: { name: string }) {
  const [repos, setRepos] = useState<string[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  const load = () => {
    setError(null);
    getJson<{ repositories: RepositorySummary[] }>("/v2/_svc/repositories/list")
      .then((b) => setRepos(b.repositories.map((r) => r.name))).catch(setError);
  };
  useEffect(load, []);
  if (error) return <ErrorState error={error} retry={load} />;
  if (!repos) return <Loading />;
  return repos.includes(name) ? <Namespaces repository={name} /> : <Manifests namespace={name} />;
}

function view(path: string) {
  if (path === "/") return <Repositories />;
  let name = path.slice(1).replace(/\/+$/, "");
  try {
    name = decodeURIComponent(name);
  } catch {
    // shown as written
  }
  const last = name.slice(name.lastIndexOf("/") + 1);
  if (name === "jobs" || name.startsWith("jobs/") || name.includes("@") || last.includes(":")) {
    return <p>This view is not built yet: {path}</p>;
  }
  return <ByName name={name} />;
}

function App() {
  const [name, setName] = useState("Wharf");
  useEffect(() => {
    getJson<UiConfig>("/v2/_svc/ui/config").then((c) => {
      setName(c.name);
      document.title = c.name;
    }).catch(() => {});
  }, []);
  const path = location.pathname;
  return (
    <>
      <header class="top">
        <a class="brand" href="/">{name}</a>
      </header>
      <main>
        {view(path)}
      </main>
    </>
  );
}

render(<App />, document.getElementById("app")!);
