// Reconcile (issue: replication): walks every replicated namespace, compares each local tag with
// the downstream (a HEAD) and enqueues a push for each one that is missing or different there;
// with `prune`, also a delete for each downstream tag absent locally. It only enqueues: the
// jobs do the work, so a reconcile and the event jobs of concurrent writes coalesce by lock key.
import type { Config, DownstreamConfig } from "../config/mod.ts";
import type { ManifestMeta } from "../metadata/mod.ts";
import type { JobQueues } from "../jobs/mod.ts";
import { deleteTagJob, downstreamsOf, pushTagJob } from "./jobs.ts";
import type { DownstreamClient } from "./client.ts";
import { downstreamName } from "./paths.ts";

export interface ReconcileOptions {
  dryRun?: boolean;
  /** only downstreams whose mode includes reconcile (the server's periodic run) */
  scheduledOnly?: boolean;
  /** only this downstream */
  downstream?: string;
  /** a line per planned job (the CLI prints them) */
  report?: (line: string) => void;
  signal?: AbortSignal;
}

export interface ReconcileSummary {
  namespaces: number;
  tags: number;
  pushes: number;
  deletes: number;
  /** downstream → error, for downstreams that could not be compared */
  errors: Record<string, string>;
}

/** What a reconcile reads and queues with (the Replicator hands in its own: Replicator.reconcile). */
export interface ReconcileDeps {
  /** the replicated namespaces, their tags and what each names */
  meta: Pick<ManifestMeta, "catalog" | "listTags" | "tag">;
  /** the `replication` queue the jobs go to */
  jobs: Pick<JobQueues, "queue">;
  /** each configured downstream's client */
  downstream: (
    name: string,
  ) => { client: Pick<DownstreamClient, "manifestDigest" | "tags"> } | undefined;
}

export async function reconcile(
  cfg: Config,
  deps: ReconcileDeps,
  opts: ReconcileOptions = {},
): Promise<ReconcileSummary> {
  const { meta, jobs } = deps;
  const sum: ReconcileSummary = { namespaces: 0, tags: 0, pushes: 0, deletes: 0, errors: {} };
  const q = jobs.queue("replication");
  const wanted = (d: DownstreamConfig) =>
    (!opts.scheduledOnly || d.mode !== "event") &&
    (opts.downstream === undefined || d.name === opts.downstream);
  let last: string | null = null;
  for (;;) {
    const page = await meta.catalog(200, last, (ns) => downstreamsOf(cfg, ns, false).some(wanted));
    for (const ns of page.names) {
      opts.signal?.throwIfAborted();
      sum.namespaces++;
      const local = await meta.listTags(ns, null, null);
      sum.tags += local.tags.length;
      for (const d of downstreamsOf(cfg, ns, false).filter(wanted)) {
        try {
          await reconcileOne(cfg, deps, q, d, ns, local.tags, opts, sum);
        } catch (e) {
          sum.errors[d.name] = e instanceof Error ? e.message : String(e);
        }
      }
    }
    if (!page.more) break;
    last = page.names[page.names.length - 1];
  }
  return sum;
}

async function reconcileOne(
  cfg: Config,
  { meta, downstream }: ReconcileDeps,
  q: ReturnType<JobQueues["queue"]>,
  d: DownstreamConfig,
  ns: string,
  tags: string[],
  opts: ReconcileOptions,
  sum: ReconcileSummary,
): Promise<void> {
  const client = downstream(d.name)!.client;
  const repo = [...cfg.repositories.values()].find((r) => r.downstreams?.includes(d))!;
  const name = downstreamName(repo.name, ns, d.url);
  for (const tag of tags) {
    const t = await meta.tag(ns, tag);
    if (!t) continue;
    const there = await client.manifestDigest(name, tag);
    if (there === t.digest) continue;
    opts.report?.(`push ${ns}:${tag} -> ${d.name} ${name}:${tag} (${there ?? "missing"})`);
    sum.pushes++;
    if (!opts.dryRun) await q.enqueue(pushTagJob(d.name, ns, tag));
  }
  if (!d.prune) return;
  const present = new Set(tags);
  for (const tag of await client.tags(name)) {
    if (present.has(tag)) continue;
    opts.report?.(`delete ${d.name} ${name}:${tag} (absent in ${ns})`);
    sum.deletes++;
    if (!opts.dryRun) await q.enqueue(deleteTagJob(d.name, ns, tag, Date.now()));
  }
}
