// What a sync works with, handed in by the composition root (lib/services/open.ts) rather than
// read off the Registry.
import type { JobQueues } from "../jobs/mod.ts";
import type { Registry } from "../registry/mod.ts";

export interface SyncDeps {
  /** the runs' records and leases (state.ts); the blob links a completeness check reads */
  kv: Deno.Kv;
  /** the `cache` queue: one `sync` job per entry */
  jobs: Pick<JobQueues, "handle" | "queue">;
  /** where a run stores what it fetches, through the pull-through cache's machinery */
  registry: Pick<Registry, "manifests" | "listings" | "pullThrough" | "signatures">;
}
