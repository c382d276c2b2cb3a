// Where a local namespace lives on a downstream: a bare-host URL keeps the namespace as it is;
// a URL with a path puts that path in place of the repository prefix (`<path>/x` for `<repo>/x`).

export function downstreamName(
  repository: string,
  namespace: string,
  downstreamUrl: string,
): string {
  const prefix = new URL(downstreamUrl).pathname.replace(/^\/+|\/+$/g, "");
  if (prefix === "") return namespace;
  if (namespace === repository) return prefix;
  if (namespace.startsWith(repository + "/")) {
    return `${prefix}/${namespace.slice(repository.length + 1)}`;
  }
  return `${prefix}/${namespace}`;
}
