// Which repository governs a namespace (DESIGN.md §Repositories), and the `?ns=` mapping.
import type { Config, RepositoryConfig } from "./schema.ts";

/**
 * The longest configured repository equal to `namespace` or a `/`-prefix of it; otherwise an
 * implicit repository named by the first path segment, governed by global settings.
 */
export function repositoryOf(cfg: Config, namespace: string): RepositoryConfig {
  let name = namespace;
  for (;;) {
    const rc = cfg.repositories.get(name);
    if (rc) return rc;
    const i = name.lastIndexOf("/");
    if (i < 0) break;
    name = name.slice(0, i);
  }
  return { name: namespace.split("/")[0] };
}

/**
 * `?ns=` on a pull: when a repository declares that registry namespace, the request is served
 * from that repository (its name prefixed to the path's name). Returns null when none does.
 */
export function resolveNsParam(cfg: Config, ns: string | null, name: string): string | null {
  if (!ns) return null;
  for (const rc of cfg.repositories.values()) {
    if (rc.namespace === ns) {
      return name === rc.name || name.startsWith(rc.name + "/") ? name : `${rc.name}/${name}`;
    }
  }
  return null;
}
