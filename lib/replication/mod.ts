// Replication to downstream registries (issue: replication): the jobs' sender, the downstream
// client and reconcile.
export { DownstreamClient, type WriteOutcome } from "./client.ts";
export { downstreamName } from "./paths.ts";
export {
  deleteDigestJob,
  deleteTagJob,
  downstreamsOf,
  pushDigestJob,
  pushTagJob,
  REPLICATION_KINDS,
  type ReplicationPayload,
} from "./jobs.ts";
export { ReplicationEffects } from "./write_effects.ts";
export { type ReplicationEvents, type ReplicationOutcome, Replicator } from "./replicator.ts";
export { reconcile, type ReconcileOptions, type ReconcileSummary } from "./reconcile.ts";
export {
  type DownstreamHealth,
  type DownstreamStatus,
  LAGGING_SECS,
  type ReplicationStatus,
  replicationStatus,
  type SyncStatusSource,
} from "./status.ts";
