// What the HTTP routes need from the metadata KV, bound to it here so that no handler holds the
// KV itself: the rate limiter of the request pipeline, file search, the replication status view
// and the long runs' progress. One set per HTTP app (serve, the Deno Deploy entry, the benches'
// in-process apps).
import type { Config } from "../config/mod.ts";
import { type JobQueues, Runs, type RunView } from "../jobs/mod.ts";
import type { QueueName } from "../config/mod.ts";
import type { Metrics } from "../metrics/mod.ts";
import { RateLimiter } from "../ratelimit/mod.ts";
import { IndexRecords, type SearchField, searchFiles, type SearchPage } from "../index/mod.ts";
import { BlobMeta, ManifestMeta } from "../metadata/mod.ts";
import { DownstreamState, type ReplicationStatus, replicationStatus } from "../replication/mod.ts";
import { SyncState, syncStatus } from "../sync/mod.ts";
import { log } from "../log.ts";

export interface HttpParts {
  /** the rate-limit step's limiter: its local buckets are this app's */
  limiter: RateLimiter;
  /** one page of `GET /v2/_svc/files/search` (lib/index searchFiles) */
  searchFiles: (
    field: SearchField,
    value: string,
    n: number,
    cursor: string | undefined,
    visible: (ns: string, layer: string) => Promise<boolean>,
  ) => Promise<SearchPage>;
  /** `GET /v2/_svc/replication/status`: per downstream, and the scheduled pull syncs' rows */
  replicationStatus: () => Promise<ReplicationStatus>;
  /** `GET /v2/_svc/jobs/progress`: the long runs whose work is the queue's, newest first */
  jobRuns: (queue: QueueName) => Promise<RunView[]>;
}

export function httpParts(
  s: { cfg: Config; kv: Deno.Kv; jobs: JobQueues; metrics?: Metrics },
): HttpParts {
  const { cfg, kv, jobs, metrics } = s;
  const search = {
    records: new IndexRecords(kv),
    blobs: new BlobMeta(kv),
    manifests: new ManifestMeta(kv),
  };
  return {
    limiter: new RateLimiter(cfg, kv, {
      onLimited: (cls) => metrics?.rateLimited.inc([cls]),
      onKvOp: (op) => metrics?.rateLimitKvOps.inc([op]),
      onError: (e) =>
        log.warn("rate limit: KV unavailable, deciding locally", { error: String(e) }),
    }),
    searchFiles: (field, value, n, cursor, visible) =>
      searchFiles(search, field, value, n, cursor, visible),
    replicationStatus: () =>
      // Scheduled pull syncs' figures are lib/sync's (`syncs` in the body).
      replicationStatus(
        cfg,
        new DownstreamState(kv),
        jobs,
        async () =>
          (await syncStatus(cfg, { state: new SyncState(kv), runs: new Runs(kv) }))
            .map((r) => ({ ...r })),
      ),
    jobRuns: (queue) => new Runs(kv).list(queue),
  };
}
