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
// ---- TEMPORARY filesystem-tab hook (branch ui-fs): replaced by the details view at merge ----
import { FilesystemTab, fsAnchor, type FsLayer, parseFsAnchor } from "./filesystem/mod.tsx";
import { apiFetch, checked, nsPath } from "./api.ts";

function FsHook({ name }: { name: string }) {
  const at = name.indexOf("@");
  const colon = name.lastIndexOf(":");
  const [ns, ref] = at >= 0 ? [name.slice(0, at), name.slice(at + 1)] : [
    name.slice(0, colon),
    name.slice(colon + 1),
  ];
  const [hash, setHash] = useState(location.hash);
  const [layers, setLayers] = useState<FsLayer[] | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    const on = () => setHash(location.hash);
    addEventListener("hashchange", on);
    return () => removeEventListener("hashchange", on);
  }, []);
  const load = () => {
    setError(null);
    apiFetch(`/v2/${nsPath(ns)}/manifests/${ref}`, {
      headers: {
        accept:
          "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json",
      },
    }).then(checked).then((r) => r.json()).then((m) => setLayers(m.layers ?? [])).catch(setError);
  };
  useEffect(load, [ns, ref]);
  if (error) return <ErrorState error={error} retry={load} />;
  if (!layers) return <Loading />;
  const route = parseFsAnchor(hash) ?? { path: null, layer: null };
  return (
    <FilesystemTab
      namespace={ns}
      layers={layers}
      route={route}
      navigate={(r) => (location.hash = fsAnchor(r))}
    />
  );
}
// ---- end of the temporary hook ----

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
  if ((name.includes("@") || last.includes(":")) && location.hash.startsWith("#filesystem")) {
    return <FsHook name={name} />; // TEMPORARY filesystem-tab hook
  }
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
