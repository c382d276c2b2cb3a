// What a sync works with, handed in by the composition root (lib/services/open.ts) rather than
// read off the Registry: its own records' store and narrow readers of the others' records.
import type { JobQueues, Runs } from "../jobs/mod.ts";
import type { BlobMeta } from "../metadata/mod.ts";
import type { Registry } from "../registry/mod.ts";
import type { SyncState } from "./state.ts";

export interface SyncDeps {
  /** the runs' records and the repositories' leases (state.ts, the folder's one store) */
  state: SyncState;
  /** a run's progress record (the Replication page), lib/jobs' */
  runs: Pick<Runs, "start">;
  /** a namespace's blob links, which a completeness check reads */
  links: Pick<BlobMeta, "link">;
  /** the `cache` queue: one `sync` job per entry */
  jobs: Pick<JobQueues, "handle" | "queue">;
  /** where a run stores what it fetches, through the pull-through cache's machinery */
  registry: Pick<Registry, "manifests" | "listings" | "pullThrough" | "signatures">;
}
