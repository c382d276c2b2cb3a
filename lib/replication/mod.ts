// Replication to downstream registries (issue: replication): the jobs' sender, the downstream
// client and reconcile. Its own records (what each downstream supports, its job runs' outcomes,
// the last success and error) are DownstreamState's (state.ts), the one file of the folder that
// holds the KV; the registry's manifests, tags and links come through lib/metadata's readers.
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
export { type ReconcileOptions, type ReconcileSummary } from "./reconcile.ts";
export { DownstreamState } from "./state.ts";
export {
  type DownstreamHealth,
  type DownstreamStatus,
  LAGGING_SECS,
  type ReplicationStatus,
  replicationStatus,
  type SyncStatusSource,
} from "./status.ts";
