// Which limit governs a repository's storage (issue 26, part 1): its own `[repository.<name>.quota]`,
// else the first `[[global.quota.namespace]]` pattern matching its name, else
// `[global.quota] default_max_bytes`. A pull-through repository with `max_cache_bytes` and no
// quota of its own is kept under its cap by eviction, never refused.
import { type Config, repositoryOf } from "../config/mod.ts";
import type { QuotaPolicy } from "../metadata/mod.ts";

export function maxBytesOf(cfg: Config, repository: string): number | null {
  const rc = cfg.repositories.get(repository);
  if (rc?.quotaMaxBytes !== undefined) return rc.quotaMaxBytes;
  if (rc?.maxCacheBytes !== undefined) return null;
  const q = cfg.global.quota;
  for (const p of q.namespaces) if (p.pattern.test(repository)) return p.maxBytes;
  return q.defaultMaxBytes;
}

/** `cfg` is read on every call, so a reloaded config applies to the next write. */
export function quotaPolicy(cfg: () => Config): QuotaPolicy {
  return {
    repositoryOf: (ns) => repositoryOf(cfg(), ns).name,
    maxBytes: (repository) => maxBytesOf(cfg(), repository),
  };
}

/** Whether any quota or cache cap is configured (usage is then shown in listings and metrics). */
export function quotasConfigured(cfg: Config): boolean {
  const q = cfg.global.quota;
  if (q.defaultMaxBytes !== null || q.namespaces.length > 0) return true;
  for (const rc of cfg.repositories.values()) {
    if (rc.quotaMaxBytes !== undefined || rc.maxCacheBytes !== undefined) return true;
  }
  return false;
}
