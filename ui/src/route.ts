// The UI's routes (SPEC §Web UI routes) parsed from a location, and client-side navigation: a
// click on a same-origin link changes the history entry instead of reloading the app.

export type Route =
  | { view: "repositories" }
  /** a repository's namespaces or a namespace's manifests: the repositories listing tells */
  | { view: "name"; name: string }
  | { view: "manifest"; namespace: string; reference: string }
  | { view: "jobs"; queue: string }
  /**
   * SPEC's `/jobs` and `/jobs/{queue}`: the job queues unless a repository named `jobs` exists,
   * whose pages then win (the queues stay at `/_jobs/{queue}`).
   */
  | { view: "jobs-or-name"; queue: string; name: string }
  | { view: "search" }
  | { view: "images" }
  | { view: "replication" }
  | { view: "audit" }
  | { view: "compare"; namespace: string }
  | { view: "signed-in" };

/** Paths of the UI's own pages begin with `_`, which no repository or namespace name can. */
export const SEARCH_PATH = "/_search";
export const COMPARE_PATH = "/_compare";
export const IMAGES_PATH = "/_images";
export const CALLBACK_PATH = "/_signed-in";
/** The job queues' own address, which no repository can take (SPEC's `/jobs` can be one). */
export const JOBS_PATH = "/_jobs";
export const QUEUES = ["cache", "replication", "scan", "index", "events"];
export const REPLICATION_PATH = "/_replication";
export const AUDIT_PATH = "/_audit";

export function parseRoute(pathname: string): Route {
  let path = pathname.replace(/\/+$/, "");
  try {
    path = decodeURIComponent(path);
  } catch {
    // shown as written
  }
  if (path === "") return { view: "repositories" };
  if (path === SEARCH_PATH) return { view: "search" };
  if (path === IMAGES_PATH) return { view: "images" };
  if (path === REPLICATION_PATH) return { view: "replication" };
  if (path === AUDIT_PATH) return { view: "audit" };
  if (path === CALLBACK_PATH) return { view: "signed-in" };
  if (path.startsWith(COMPARE_PATH + "/")) {
    return { view: "compare", namespace: path.slice(COMPARE_PATH.length + 1) };
  }
  if (path === JOBS_PATH) return { view: "jobs", queue: "cache" };
  if (
    path.startsWith(JOBS_PATH + "/") &&
    !path.slice(JOBS_PATH.length + 1).includes("/")
  ) {
    return { view: "jobs", queue: path.slice(JOBS_PATH.length + 1) };
  }
  if (path === "/jobs") {
    return { view: "jobs-or-name", queue: "cache", name: "jobs" };
  }
  // A queue name holds no `:` or `@`: `/jobs/app:v1` is always a manifest of `jobs/app`.
  if (path.startsWith("/jobs/") && QUEUES.includes(path.slice(6))) {
    return { view: "jobs-or-name", queue: path.slice(6), name: path.slice(1) };
  }
  const name = path.slice(1);
  // A namespace name holds neither `@` nor `:`, so the first `@` opens a digest and a `:` in the
  // last segment opens a tag.
  const at = name.indexOf("@");
  if (at > 0) {
    return {
      view: "manifest",
      namespace: name.slice(0, at),
      reference: name.slice(at + 1),
    };
  }
  const slash = name.lastIndexOf("/");
  const colon = name.indexOf(":", slash + 1);
  if (colon > 0) {
    return {
      view: "manifest",
      namespace: name.slice(0, colon),
      reference: name.slice(colon + 1),
    };
  }
  return { view: "name", name };
}

/** The path of a manifest's details: `/{namespace}:{tag}` or `/{namespace}@{digest}`. */
export function manifestPath(namespace: string, reference: string): string {
  return `/${namespace}${reference.includes(":") ? "@" : ":"}${reference}`;
}

const listeners = new Set<() => void>();

/** Subscribes to location changes (links, back/forward, hash changes); returns the unsubscribe. */
export function onLocationChange(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

function changed() {
  for (const l of listeners) l();
}

export function navigate(url: string, replace = false) {
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  changed();
}

/** Installs the link interception once: plain left clicks on same-origin app links. */
export function installRouter() {
  addEventListener("popstate", changed);
  addEventListener("hashchange", changed);
  document.addEventListener("click", (e) => {
    if (
      e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey ||
      e.shiftKey || e.altKey
    ) {
      return;
    }
    const a = (e.target as Element | null)?.closest?.("a");
    if (!a || a.target || a.hasAttribute("download")) return;
    const url = new URL(a.href, location.href);
    if (url.origin !== location.origin || url.pathname.startsWith("/v2/")) {
      return;
    }
    e.preventDefault();
    if (url.pathname === location.pathname && url.search === location.search) {
      if (url.hash !== location.hash) {
        navigate(url.pathname + url.search + url.hash);
      }
      return;
    }
    navigate(url.pathname + url.search + url.hash);
    scrollTo(0, 0);
  });
}
