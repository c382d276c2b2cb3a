// The repositories a caller can see: those the listing names (they hold something) and the
// configured ones it leaves out because they hold nothing yet (`GET
// /v2/_svc/repositories/configured`: a pull-through cache before its first pull, a repository
// with only a quota). An empty one reads as holding 0 namespaces.
import { getJson, type RepositorySummary } from "./api.ts";

/** A configured repository (docs/api.md "Configured repositories"): no namespace count. */
export type ConfiguredRepository = Omit<RepositorySummary, "namespace_count">;

/** A repository row: `empty` when only the configuration names it. */
export type KnownRepository = RepositorySummary & {
  empty?: true;
  used_bytes?: number;
  quota_bytes?: number | null;
  max_cache_bytes?: number;
};

/**
 * The listing, then each configured repository it does not name, as holding nothing. A server
 * that refuses the configured list (a policy, an older Wharf) leaves the listing as it is.
 */
export async function knownRepositories(): Promise<KnownRepository[]> {
  const [listed, configured] = await Promise.all([
    getJson<{ repositories: KnownRepository[] }>("/v2/_svc/repositories/list"),
    getJson<{ repositories: ConfiguredRepository[] }>(
      "/v2/_svc/repositories/configured",
    )
      .catch(() => ({ repositories: [] })),
  ]);
  const names = new Set(listed.repositories.map((r) => r.name));
  return [
    ...listed.repositories,
    ...configured.repositories.filter((r) => !names.has(r.name)).map((r) => ({
      ...r,
      namespace_count: 0,
      empty: true as const,
    })),
  ];
}
