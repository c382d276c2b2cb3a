// openServices: the one place that builds Wharf's objects from a config, for every process that
// needs them (serve, worker, the one-shot commands, the Deno Deploy entry). What differs between
// them is said once here, by role, instead of in each entry point.
import { type Config, JOB_QUEUES, type QueueName } from "../config/mod.ts";
import { JobQueues, type JobRunner, Runs } from "../jobs/mod.ts";
import { commitRetryCounts, instrumentKv, openMetadata, strictIfRequested } from "../kv/mod.ts";
import {
  BlobMeta,
  countUploadSessions,
  DigestHolds,
  ManifestMeta,
  SvcMeta,
} from "../metadata/mod.ts";
import {
  type BlobStore,
  InstrumentedBlobStore,
  openBlobStore,
  type StoreWatch,
  watchStores,
} from "../storage/mod.ts";
import { Metrics } from "../metrics/mod.ts";
import { Registry } from "../registry/mod.ts";
import { DownstreamState, Replicator } from "../replication/mod.ts";
import { Syncer, SyncState, syncStatus } from "../sync/mod.ts";
import { IndexRecords, LayerIndex } from "../index/mod.ts";
import { AdvisoryStore, Reports, ScanRecords } from "../scan/mod.ts";
import { countOutbox, OutboxDrainer } from "../events/mod.ts";
import { log } from "../log.ts";
import { allWriteEffects } from "./write_effects.ts";
import { reportIntegrity } from "./verifier.ts";
import { startHealing } from "./heal.ts";

/**
 * - `serve`: HTTP and the job queues in one process; everything instrumented, queues drained,
 *   the webhook outbox delivered, advisories watched.
 * - `worker`: the queues named in `queues` (default all) without HTTP.
 * - `deploy`: Deno Deploy's KV, handlers registered but nothing drained (a cron does that).
 * - `command`: a one-shot command; only what it touches is built, nothing runs in the background.
 */
export type Role = "serve" | "worker" | "deploy" | "command";

export interface OpenOptions {
  role: Role;
  /** `worker`: the queues to drain (default all) */
  queues?: QueueName[];
  /** `deploy`: a KV file instead of Deploy's own KV (local runs) */
  deployKvPath?: string;
  /**
   * How long a pull stamp keeps a cached image in use (ms; default a minute). Only tests shorten
   * it (commands/test_env.ts reads their knob at the entry point).
   */
  cacheHoldMs?: number;
}

export interface Services {
  readonly cfg: Config;
  readonly role: Role;
  /** the metadata KV every part shares (instrumented when serving) */
  readonly kv: Deno.Kv;
  readonly store: BlobStore;
  /** free space and faults of the blob store and the KV file (/readyz, /metrics) */
  readonly watch: StoreWatch;
  readonly metrics: Metrics;
  readonly jobs: JobQueues;
  readonly registry: Registry;
  readonly replicator: Replicator;
  readonly syncer: Syncer;
  readonly layers: LayerIndex;
  readonly reports: Reports;
  /** draining the queues in this process (`serve`, `worker`), else null */
  readonly runner: JobRunner | null;
  /** delivering the webhook outbox in this process, else null */
  readonly outbox: OutboxDrainer | null;
  /** stops background work (running jobs finish or their grace runs out), then closes the stores */
  close(): Promise<void>;
}

/** How this process names itself in job leases (shown in logs, never trusted). */
export function holderName(role: string): string {
  return `${role} ${Deno.hostname()}:${Deno.pid} ${crypto.randomUUID().slice(0, 8)}`;
}

export async function openServices(cfg: Config, opts: OpenOptions): Promise<Services> {
  const { role } = opts;
  const background = role !== "command";
  const metrics = new Metrics();
  if (role === "serve") metrics.watchEventLoop();
  const watch = watchStores(cfg);
  const rawStore = await openBlobStore(cfg, watch);
  // Deploy serves /metrics without blob timings, and a worker's KV figures are nobody's to read.
  const store = role === "serve" || role === "worker"
    ? new InstrumentedBlobStore(rawStore, metrics.observeBlobStore)
    : rawStore;
  const rawKv = role === "deploy"
    ? strictIfRequested(await Deno.openKv(opts.deployKvPath || undefined))
    : await openMetadata(
      cfg.metadataStore.url ?? cfg.metadataStore.path,
      (f) => f ? watch.metadata.fault(f.kind, f.detail) : watch.metadata.ok(),
    );
  const kv = role === "serve" ? instrumentKv(rawKv, metrics.observeKv) : rawKv;
  if (role === "serve") {
    metrics.countUploadSessionsWith(() => countUploadSessions(rawKv));
    metrics.commitRetriesFrom(commitRetryCounts);
    reportIntegrity(metrics, rawKv);
    metrics.storesFrom(() => watch.figures(), () => watch.refusals.values());
  }
  const jobs = background
    ? new JobQueues(kv, cfg.global.jobQueue, metrics.jobEvents)
    : new JobQueues(kv, cfg.global.jobQueue);
  if (background) metrics.countJobsWith(JOB_QUEUES, (q) => jobs.queue(q as QueueName).counts());

  // Built on first use, so a command pays (and risks a bad ca_bundle) only for what it reads.
  let registry: Registry | undefined;
  let replicator: Replicator | undefined;
  let syncer: Syncer | undefined;
  let layers: LayerIndex | undefined;
  let reports: Reports | undefined;
  let stopHealing = () => Promise.resolve();
  const reg = () =>
    registry ??= new Registry(
      cfg,
      kv,
      store,
      background
        ? {
          jobs,
          effects: allWriteEffects(cfg),
          observeUpstream: metrics.observeUpstream,
          observePullThrough: (kind, result) => metrics.pullThroughResult(kind, result),
          observeEvictions: metrics.cacheEvicted,
          observeSignatures: metrics.signatures,
          cacheHoldMs: opts.cacheHoldMs,
          blobRefusal: () => watch.blobRefusal(),
        }
        : {
          jobs,
          effects: allWriteEffects(cfg),
          cacheHoldMs: opts.cacheHoldMs,
          blobRefusal: () => watch.blobRefusal(),
        },
    );
  const services: Services = {
    cfg,
    role,
    kv,
    store,
    watch,
    metrics,
    jobs,
    get registry() {
      return reg();
    },
    get replicator() {
      return replicator ??= new Replicator(
        {
          cfg,
          state: new DownstreamState(kv),
          meta: new ManifestMeta(kv),
          blobs: new BlobMeta(kv),
          holds: new DigestHolds(kv),
          store,
          jobs,
          manifests: reg().manifests,
          listings: reg().listings,
          signatures: reg().signatures,
        },
        background ? metrics.replicationEvents : undefined,
      );
    },
    get syncer() {
      return syncer ??= new Syncer(cfg, {
        state: new SyncState(kv),
        runs: new Runs(kv),
        links: new BlobMeta(kv),
        jobs,
        registry: reg(),
      });
    },
    get layers() {
      return layers ??= new LayerIndex({
        cfg,
        records: new IndexRecords(kv),
        blobs: new BlobMeta(kv),
        catalog: new SvcMeta(kv),
        revisions: new ManifestMeta(kv),
        runs: new Runs(kv),
        store,
        jobs,
        manifests: reg().manifests,
        upstream: reg(),
      });
    },
    get reports() {
      return reports ??= new Reports({
        cfg,
        records: new ScanRecords(kv),
        advisories: new AdvisoryStore(kv),
        layers: services.layers,
        revisions: new ManifestMeta(kv),
        blobs: new BlobMeta(kv),
        catalog: new SvcMeta(kv),
        holds: new DigestHolds(kv),
        runs: new Runs(kv),
        store,
        jobs,
        effects: reg().effects,
        manifests: reg().manifests,
      });
    },
    runner: null,
    outbox: null,
    close: async () => {
      await stopHealing();
      reports?.stop();
      await jobs.stop();
      await services.outbox?.stop();
      replicator?.close();
      if (registry) {
        await registry.close();
        await registry.pulls.settled();
      }
      kv.close();
    },
  };
  if (!background) return services;

  if (role === "serve") metrics.repositoryUsageWith(() => services.registry.usageFigures());
  registerJobHandlers(services);
  if (role !== "deploy") services.reports.watchAdvisories();
  if (role === "serve") metrics.advisoriesWith(() => services.reports.status());
  if (role === "deploy") return services;

  const drained = role === "worker" && opts.queues?.length ? opts.queues : [...JOB_QUEUES];
  const runner = jobs.start(holderName(role), drained);
  // What failed for a machine reason (before a restart too) is queued again (heal.ts).
  stopHealing = startHealing(services, drained);
  const outbox = drained.includes("events") ? drainOutbox(services) : null;
  if (role === "serve") metrics.outboxPendingWith(() => countOutbox(rawKv, cfg));
  return Object.assign(services, { runner, outbox });
}

/** The job kinds this build runs; every process that drains queues registers them all. */
function registerJobHandlers(s: Services): void {
  const { cfg, metrics, registry } = s;
  registry.registerJobHandlers();
  s.replicator.register();
  s.syncer.register();
  s.syncer.schedule().catch((e) =>
    log.error("could not schedule the syncs", { error: e instanceof Error ? e.message : String(e) })
  );
  if ([...cfg.repositories.values()].some((r) => (r.syncs ?? []).length > 0)) {
    metrics.syncStatusFrom(() =>
      syncStatus(cfg, { state: new SyncState(s.kv), runs: new Runs(s.kv) })
    );
  }
  const downstreams = [...cfg.repositories.values()].flatMap((r) =>
    (r.downstreams ?? []).map((d) => d.name)
  );
  if (downstreams.length > 0) {
    metrics.replicationLagWith(downstreams, async () => {
      const ages = new Map<string, number>();
      const now = Date.now();
      for (const r of await s.jobs.queue("replication").pendingRecords(10_000)) {
        const d = (r.payload as { downstream?: unknown } | null)?.downstream;
        if (typeof d !== "string") continue;
        ages.set(d, Math.max(ages.get(d) ?? 0, (now - r.created_at) / 1000));
      }
      return ages;
    });
  }
  s.layers.register();
  s.reports.register();
}

/** Delivers async webhook events from the outbox in this process (lib/events/outbox.ts). */
function drainOutbox(s: Services): OutboxDrainer {
  const drainer = new OutboxDrainer(s.kv, s.cfg, holderName(s.role));
  s.registry.events.wakeOutbox = () => drainer.wake();
  drainer.start();
  return drainer;
}
