// Where a local namespace lives upstream (DESIGN.md §Pull-through): the repository prefix is
// replaced by the upstream URL's path, or dropped for a bare host.

// Docker Hub keeps official images under `library/`; its own clients add the prefix to a
// one-segment name, so `hub/alpine` must become `library/alpine` for the same image.
const DOCKER_HUB_HOSTS = new Set(["registry-1.docker.io", "index.docker.io", "docker.io"]);

/**
 * The upstream name of `namespace` in `repository` for the upstream at `upstreamUrl`, or null
 * when the namespace is the repository itself (nothing to name upstream) or not under it.
 */
export function upstreamName(
  repository: string,
  namespace: string,
  upstreamUrl: string,
): string | null {
  if (!namespace.startsWith(repository + "/")) return null;
  const rest = namespace.slice(repository.length + 1);
  if (rest === "") return null;
  const url = new URL(upstreamUrl);
  const prefix = url.pathname.replace(/^\/+|\/+$/g, "");
  if (prefix !== "") return `${prefix}/${rest}`;
  if (DOCKER_HUB_HOSTS.has(url.hostname) && !rest.includes("/")) return `library/${rest}`;
  return rest;
}

/** The token scope a pull of `name` needs. */
export const pullScope = (name: string): string => `repository:${name}:pull`;

/** `<origin>/v2/<name>/<kind>/<ref>`: the upstream URL's path is part of names, not the base. */
export function apiUrl(
  upstreamUrl: string,
  name: string,
  kind: "manifests" | "blobs" | "referrers" | "tags",
  ref: string,
): URL {
  return new URL(`/v2/${name}/${kind}/${ref}`, new URL(upstreamUrl).origin);
}
