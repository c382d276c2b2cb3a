// Wharf's composition root: reads config, opens KV and the blob store, serves.
// Usage: main.ts [COMMAND] [OPTIONS] [-c FILE]... (later config files win); `main.ts --help`
// and `main.ts COMMAND --help` (lib/usage.ts) describe every command and option.
import {
  type Config,
  ConfigError,
  ConfigReloader,
  defaultConfig,
  isEcosystemName,
  JOB_QUEUES,
  loadConfigFiles,
  type QueueName,
} from "./lib/config/mod.ts";
import { isQueueName, JobQueues } from "./lib/jobs/mod.ts";
import { isUpstreamError } from "./lib/upstream/mod.ts";
import { reconcile, type ReconcileSummary, Replicator } from "./lib/replication/mod.ts";
import { formatSyncRun, Syncer, syncStatus } from "./lib/sync/mod.ts";
import { forgetLayerIndex, LayerIndex } from "./lib/index/mod.ts";
import { advisoriesCommand, formatSnapshot, Reports, sweepReports } from "./lib/scan/mod.ts";
import {
  commitRetryCounts,
  countUploadSessions,
  instrumentKv,
  openMetadata,
  sweepPullHistory,
} from "./lib/metadata/mod.ts";
import {
  type BlobStore,
  describeBlobStore,
  InstrumentedBlobStore,
  openBlobStore,
} from "./lib/storage/mod.ts";
import { Metrics } from "./lib/metrics/mod.ts";
import { formatSummary, Registry, type RegistryOptions, Scrubber } from "./lib/registry/mod.ts";
import { type ConnEnv, createApp } from "./routes/app.ts";
import { serveTls } from "./routes/tls_listener.ts";
import { Authenticator, ClientIpResolver, hashPassword } from "./lib/auth/mod.ts";
import { PolicyCompileError, PolicySet } from "./lib/policy/mod.ts";
import { log } from "./lib/log.ts";
import { COMMANDS, helpText } from "./lib/usage.ts";
import { countOutbox, OutboxDrainer } from "./lib/events/mod.ts";
import { auditedRun, AuditTrail } from "./lib/audit/mod.ts";
import {
  compileRetention,
  formatPrune,
  prune,
  pullTimesWithoutRecording,
  RetentionCompileError,
} from "./lib/retention/mod.ts";

interface Cli {
  command: string;
  configFiles: string[];
  dryRun: boolean;
  /** `worker --queue`: the queues to drain (default all) */
  queues: QueueName[];
  /** `reindex --force` */
  force: boolean;
  /** `scan --namespace N` */
  namespace: string | null;
  /** `scan --rescan`: queue every image, not only those without a current report */
  rescan: boolean;
  /** `scan --status` */
  status: boolean;
  /** `prune --now <RFC 3339>`: the clock retention rules see (ms) */
  now: number | null;
  /** `sync --repository R`: that repository's syncs only */
  repository: string | null;
  /** `--help`: print the command's usage, run nothing */
  help: boolean;
  /** `advisories fetch|status` */
  sub: string | null;
  /** `advisories --dir D` */
  dir: string | null;
  /** `advisories fetch --ecosystem E` */
  ecosystems: string[];
}

function parseArgs(args: string[]): Cli {
  const cli: Cli = {
    command: "serve",
    configFiles: [],
    dryRun: false,
    queues: [],
    force: false,
    namespace: null,
    rescan: false,
    status: false,
    now: null,
    repository: null,
    help: false,
    sub: null,
    dir: null,
    ecosystems: [],
  };
  let i = 0;
  const named = args[0] !== undefined && !args[0].startsWith("-");
  if (named) cli.command = args[i++];
  if (cli.command === "help") [cli.command, cli.help] = [args[i++] ?? "", true];
  if (cli.command === "advisories" && args[i] && !args[i].startsWith("-")) cli.sub = args[i++];
  // Asking for help never fails on the other arguments.
  if (args.includes("--help") || args.includes("-h")) {
    return { ...cli, command: named ? cli.command : "", help: true };
  }
  for (; i < args.length; i++) {
    const a = args[i];
    if (a === "-c" || a === "--config") {
      const f = args[++i];
      if (!f) throw new ConfigError(`${a} needs a file`);
      cli.configFiles.push(f);
    } else if (a === "--dry-run") {
      cli.dryRun = true;
    } else if (a === "--force") {
      cli.force = true;
    } else if (a === "--rescan") {
      cli.rescan = true;
    } else if (a === "--status") {
      cli.status = true;
    } else if (a === "--now") {
      const t = Date.parse(args[++i] ?? "");
      if (!Number.isFinite(t)) throw new ConfigError(`--now needs an RFC 3339 time`);
      cli.now = t;
    } else if (a === "--repository") {
      const r = args[++i];
      if (!r) throw new ConfigError(`--repository needs a repository name`);
      cli.repository = r;
    } else if (a === "--namespace") {
      const n = args[++i];
      if (!n) throw new ConfigError(`--namespace needs a repository name`);
      cli.namespace = n;
    } else if (a === "--queue" || a.startsWith("--queue=")) {
      const q = a === "--queue" ? args[++i] : a.slice("--queue=".length);
      if (!q || !isQueueName(q)) {
        throw new ConfigError(
          `--queue needs one of ${JOB_QUEUES.join(", ")} (got ${q ?? "nothing"})`,
        );
      }
      if (!cli.queues.includes(q)) cli.queues.push(q);
    } else if (a === "--dir") {
      const d = args[++i];
      if (!d) throw new ConfigError(`--dir needs a directory`);
      cli.dir = d;
    } else if (a === "--ecosystem") {
      const e = args[++i];
      if (!e || !isEcosystemName(e)) {
        throw new ConfigError(
          `--ecosystem needs an OSV ecosystem name such as Debian, Alpine, npm (got ${
            e ?? "nothing"
          })`,
        );
      }
      if (!cli.ecosystems.includes(e)) cli.ecosystems.push(e);
    } else if (a.startsWith("--config=")) {
      cli.configFiles.push(a.slice("--config=".length));
    } else {
      throw new ConfigError(
        `unknown argument ${a} (main.ts ${cli.command} --help lists the options)`,
      );
    }
  }
  return cli;
}

/** The startup line's account of the config; `ui`: whether this process serves HTTP at all. */
function describe(cfg: Config, ui = true): string {
  const p = cfg.global.accessPolicy;
  const policy = p.rules.length === 0
    ? `access policy: ${p.default} all`
    : `access policy: default ${p.default}, ${p.rules.length} rule(s)`;
  const source = cfg.sources.length
    ? `config ${cfg.sources.join(", ")}`
    : "embedded default config";
  return `${source}; blobs ${describeBlobStore(cfg)}; metadata ${
    cfg.metadataStore.url ?? cfg.metadataStore.path
  }; ${policy}${ui ? `; web UI ${cfg.ui.enabled ? "on at /" : "off"}` : ""}`;
}

/**
 * What a config must pass beyond loading before it is served (at startup and on reload): every
 * CEL rule compiles, and a retention schedule does not read pull times nobody records.
 */
function validated(cfg: Config): PolicySet {
  const policies = new PolicySet(cfg);
  const rules = compileRetention(cfg);
  const key = pullTimesWithoutRecording(cfg, rules);
  if (key && cfg.global.retentionSchedule.intervalSecs !== null) {
    throw new RetentionCompileError(
      `${key} reads pull times but global.update_pull_time is off (they are not recorded)`,
    );
  }
  return policies;
}

/** The listening port is taken, or not ours to take: said in one line, nothing opened. */
class ListenError extends Error {}

function listenError(cfg: Config, e: unknown): ListenError | null {
  const at = `${cfg.server.bindAddress}:${cfg.server.port}`;
  if (e instanceof Deno.errors.AddrInUse) {
    return new ListenError(
      `${at} is already in use (another Wharf or another service); stop it or set [server] port`,
    );
  }
  if (e instanceof Deno.errors.AddrNotAvailable) {
    return new ListenError(`${at}: no such address on this machine; check [server] bind_address`);
  }
  if (e instanceof Deno.errors.PermissionDenied) {
    return new ListenError(`${at}: not allowed to listen there (${e.message})`);
  }
  return null;
}

/**
 * Binds and releases the port before anything is opened, so a second start on a taken port
 * stops with a line rather than after its job runner started (Deno.serve's own AddrInUse, in a
 * race with another process, is still turned into the same line).
 */
function probePort(cfg: Config): void {
  if (cfg.server.port === 0) return;
  try {
    Deno.listen({ hostname: cfg.server.bindAddress, port: cfg.server.port }).close();
  } catch (e) {
    throw listenError(cfg, e) ?? e;
  }
}

async function serve(cfg: Config): Promise<void> {
  const policies = validated(cfg); // compile first: a bad rule stops startup before any I/O
  probePort(cfg);
  const fsStore = await openBlobStore(cfg);
  const metrics = new Metrics();
  metrics.watchEventLoop();
  const store = new InstrumentedBlobStore(fsStore, metrics.observeBlobStore);
  const rawKv = await openMetadata(cfg.metadataStore.url ?? cfg.metadataStore.path);
  const kv = instrumentKv(rawKv, metrics.observeKv);
  metrics.countUploadSessionsWith(() => countUploadSessions(rawKv));
  metrics.commitRetriesFrom(commitRetryCounts);
  const jobs = jobQueues(cfg, kv, metrics);
  const registry = new Registry(cfg, kv, store, registryOptions(jobs, metrics));
  metrics.repositoryUsageWith(() => registry.usageFigures());
  const replicator = registerJobHandlers(cfg, registry, metrics);
  const layers = new LayerIndex(cfg, registry);
  layers.register();
  const reports = new Reports(cfg, registry);
  reports.register();
  reports.watchAdvisories();
  metrics.advisoriesWith(() => reports.status());
  jobs.start(holderName("serve"));
  const outbox = drainOutbox(cfg, kv, registry, "serve");
  metrics.outboxPendingWith(() => countOutbox(rawKv, cfg));
  const services = {
    registry,
    metrics,
    policies,
    authenticator: new Authenticator(cfg),
    clientIp: new ClientIpResolver(cfg.server.trustedProxies),
    layers,
    reports,
  };
  const app = createApp(services);
  // Edits to the config files (or SIGHUP) apply without a restart; see lib/config/reload.ts.
  const reloader = new ConfigReloader(cfg, (next) => {
    const nextPolicies = validated(next);
    const authenticator = new Authenticator(next);
    const upstreams = registry.pullThrough.prepareReload(next);
    const downstreams = replicator.prepareReload(next);
    return () => {
      policies.adopt(nextPolicies);
      services.authenticator = authenticator;
      upstreams();
      downstreams();
      // A sync entry the reload added gets its first run queued (existing ones keep theirs).
      new Syncer(next, registry).schedule().catch(() => {});
    };
  }, (r) => {
    const restart = r.restart?.length ? `; needs a restart: ${r.restart.join(", ")}` : "";
    registry.events.audit.record({
      action: "config.reload",
      outcome: r.ok ? "ok" : "failed",
      detail: r.ok ? `${cfg.sources.join(", ")}${restart}` : r.error,
    });
  });
  reloader.start();
  const ac = new AbortController();
  const stopScrub = scheduleScrub(
    cfg,
    scrubberFor(cfg, kv, store, SERVE_SCRUB_HOLDER),
    ac.signal,
    metrics,
  );
  const stopReconcile = scheduleReconcile(cfg, registry, replicator, ac.signal);
  const stopPrune = schedulePrune(cfg, registry, ac.signal);
  const stop = () => {
    if (ac.signal.aborted) return;
    console.log("wharf stopping: finishing open requests and running jobs");
    reloader.stop();
    reports.stop();
    stopScrub();
    stopReconcile();
    stopPrune();
    ac.abort();
  };
  Deno.addSignalListener("SIGTERM", stop);
  Deno.addSignalListener("SIGINT", stop);
  if (cfg.server.tls) {
    const tls = await serveTls({
      hostname: cfg.server.bindAddress,
      port: cfg.server.port,
      tls: cfg.server.tls,
      handler: (req, conn) => app.fetch(req, conn satisfies ConnEnv),
      onListen: ({ hostname, port }) => {
        console.log(
          `wharf listening on https://${hostname}:${port} (${describe(cfg)}; client certificates: ${
            cfg.server.tls!.clientAuth
          })`,
        );
      },
    });
    await new Promise<void>((resolve) => ac.signal.addEventListener("abort", () => resolve()));
    await tls.close();
    await jobs.stop();
    await outbox.stop();
    replicator.close();
    await registry.close();
    await registry.pulls.settled();
    kv.close();
    console.log("wharf stopped");
    return;
  }
  const server = Deno.serve(
    {
      hostname: cfg.server.bindAddress,
      port: cfg.server.port,
      signal: ac.signal,
      onListen: ({ hostname, port }) => {
        console.log(`wharf listening on http://${hostname}:${port} (${describe(cfg)})`);
        console.log("press Ctrl+C to stop");
      },
      onError: (e) => {
        log.error("unhandled server error", { error: e instanceof Error ? e.stack : String(e) });
        return new Response(
          JSON.stringify({
            errors: [{ code: "INTERNAL_ERROR", message: "internal server error", detail: "" }],
          }),
          {
            status: 500,
            headers: { "Content-Type": "application/json" },
          },
        );
      },
    },
    (req, info) =>
      app.fetch(req, { remoteAddr: info.remoteAddr.hostname, certificate: null } satisfies ConnEnv),
  );
  await server.finished;
  await jobs.stop();
  await outbox.stop();
  replicator.close();
  await registry.close();
  await registry.pulls.settled();
  kv.close();
  console.log("wharf stopped");
}

export function jobQueues(cfg: Config, kv: Deno.Kv, metrics: Metrics): JobQueues {
  const jobs = new JobQueues(kv, cfg.global.jobQueue, metrics.jobEvents);
  metrics.countJobsWith(JOB_QUEUES, (q) => jobs.queue(q as QueueName).counts());
  return jobs;
}

export function registryOptions(jobs: JobQueues, metrics: Metrics): RegistryOptions {
  return {
    jobs,
    observeUpstream: metrics.observeUpstream,
    observePullThrough: (kind, result) => metrics.pullThroughResult(kind, result),
    observeEvictions: metrics.cacheEvicted,
  };
}

/** Delivers async webhook events from the outbox in this process (lib/events/outbox.ts). */
function drainOutbox(cfg: Config, kv: Deno.Kv, registry: Registry, role: string): OutboxDrainer {
  const drainer = new OutboxDrainer(kv, cfg, holderName(role));
  registry.events.wakeOutbox = () => drainer.wake();
  drainer.start();
  return drainer;
}

/** How this process names itself in job leases (shown in logs, never trusted). */
export function holderName(role: string): string {
  return `${role} ${Deno.hostname()}:${Deno.pid} ${crypto.randomUUID().slice(0, 8)}`;
}

/** The job kinds this build runs; every process that drains queues registers them all. */
export function registerJobHandlers(cfg: Config, registry: Registry, metrics: Metrics): Replicator {
  registry.registerJobHandlers();
  const replicator = new Replicator(cfg, registry, metrics.replicationEvents);
  replicator.register();
  const syncer = new Syncer(cfg, registry);
  syncer.register();
  syncer.schedule().catch((e) =>
    log.error("could not schedule the syncs", { error: e instanceof Error ? e.message : String(e) })
  );
  if ([...cfg.repositories.values()].some((r) => (r.syncs ?? []).length > 0)) {
    metrics.syncStatusFrom(() => syncStatus(cfg, registry.kv));
  }
  const downstreams = [...cfg.repositories.values()].flatMap((r) =>
    (r.downstreams ?? []).map((d) => d.name)
  );
  if (downstreams.length > 0) {
    metrics.replicationLagWith(downstreams, async () => {
      const ages = new Map<string, number>();
      const now = Date.now();
      for (const r of await registry.jobs.queue("replication").pendingRecords(10_000)) {
        const d = (r.payload as { downstream?: unknown } | null)?.downstream;
        if (typeof d !== "string") continue;
        ages.set(d, Math.max(ages.get(d) ?? 0, (now - r.created_at) / 1000));
      }
      return ages;
    });
  }
  return replicator;
}

/** Reconcile inside the server for downstreams whose mode includes it, one run at a time. */
function scheduleReconcile(
  cfg: Config,
  registry: Registry,
  replicator: Replicator,
  signal: AbortSignal,
): () => void {
  const intervals = [...cfg.repositories.values()].flatMap((r) =>
    (r.downstreams ?? []).filter((d) => d.mode !== "event").map((d) => d.reconcileIntervalSecs)
  );
  if (intervals.length === 0) return () => {};
  let running = false;
  const timer = setInterval(async () => {
    if (running || signal.aborted) return;
    running = true;
    try {
      const s = await reconcile(cfg, registry.kv, registry.jobs, replicator, {
        scheduledOnly: true,
        signal,
      });
      log.info("reconcile finished", { ...s, errors: JSON.stringify(s.errors) });
    } catch (e) {
      if (!signal.aborted) {
        log.error("reconcile failed", { error: e instanceof Error ? e.message : String(e) });
      }
    } finally {
      running = false;
    }
  }, Math.min(...intervals) * 1000);
  return () => clearInterval(timer);
}

function formatReconcile(s: ReconcileSummary, dryRun: boolean): string {
  const verb = dryRun ? "would enqueue" : "enqueued";
  const errors = Object.entries(s.errors).map(([d, e]) => `\n  ${d}: ${e}`).join("");
  return `reconcile: ${s.namespaces} namespace(s), ${s.tags} tag(s); ${verb} ${s.pushes} push(es) and ${s.deletes} delete(s)${
    errors ? `; errors:${errors}` : ""
  }`;
}

/** `main.ts reindex [--dry-run] [--force]`: queues layers without a current index. */
async function reindex(cfg: Config, dryRun: boolean, force: boolean): Promise<number> {
  const store = await openBlobStore(cfg);
  const kv = await openMetadata(cfg.metadataStore.url ?? cfg.metadataStore.path);
  const registry = new Registry(cfg, kv, store);
  try {
    const r = await new LayerIndex(cfg, registry).reindex({
      dryRun,
      force,
      report: (line) => console.log(`${dryRun ? "would " : ""}${line}`),
    });
    console.log(
      `reindex: ${r.layers} layer(s); ${dryRun ? "would queue" : "queued"} ${r.queued}`,
    );
    return 0;
  } finally {
    await registry.close();
    kv.close();
  }
}

/**
 * `main.ts scan [--namespace N] [--rescan] [--dry-run]`: queues scans of the images without a
 * current report (every image with --rescan); `scan --status` prints the advisory snapshot.
 */
async function scan(cfg: Config, cli: Cli): Promise<number> {
  const store = await openBlobStore(cfg);
  const kv = await openMetadata(cfg.metadataStore.url ?? cfg.metadataStore.path);
  const registry = new Registry(cfg, kv, store);
  const reports = new Reports(cfg, registry);
  try {
    if (cli.status) {
      console.log(formatSnapshot(await reports.status(), cfg));
      return 0;
    }
    const n = await reports.rescanAll({
      namespace: cli.namespace ?? undefined,
      dryRun: cli.dryRun,
      onlyStale: !cli.rescan,
      report: (line) => console.log(`${cli.dryRun ? "would " : ""}${line}`),
    });
    console.log(`scan: ${cli.dryRun ? "would queue" : "queued"} ${n} image(s)`);
    return 0;
  } finally {
    await registry.close();
    kv.close();
  }
}

/** `main.ts replicate [--dry-run]`: one reconcile pass over every downstream; jobs do the work. */
async function replicate(cfg: Config, dryRun: boolean): Promise<number> {
  const store = await openBlobStore(cfg);
  const kv = await openMetadata(cfg.metadataStore.url ?? cfg.metadataStore.path);
  const registry = new Registry(cfg, kv, store);
  const replicator = new Replicator(cfg, registry);
  try {
    const s = await reconcile(cfg, kv, registry.jobs, replicator, {
      dryRun,
      report: (line) => console.log(`${dryRun ? "would " : ""}${line}`),
    });
    console.log(formatReconcile(s, dryRun));
    return Object.keys(s.errors).length ? 1 : 0;
  } finally {
    replicator.close();
    await registry.close();
    kv.close();
  }
}

/**
 * `main.ts sync [--repository R] [--dry-run]`: runs each `[[repository."<name>".sync]]` entry
 * once now, under the repository's lease (a scheduled run elsewhere makes it exit 1).
 */
async function syncCommand(cfg: Config, cli: Cli): Promise<number> {
  const store = await openBlobStore(cfg);
  const kv = await openMetadata(cfg.metadataStore.url ?? cfg.metadataStore.path);
  const registry = new Registry(cfg, kv, store);
  const syncer = new Syncer(cfg, registry);
  try {
    const entries = syncer.entries(cli.repository ?? undefined);
    if (entries.length === 0) {
      console.error(
        `wharf: sync: no [[repository."${cli.repository ?? "<name>"}".sync]] entry configured`,
      );
      return 2;
    }
    let code = 0;
    for (const [repo, n] of entries) {
      const r = await syncer.runNow(repo, n, holderName("sync"), {
        dryRun: cli.dryRun,
        report: (line) => console.log(`${repo}#${n}: ${line}`),
      });
      if ("busy" in r) {
        console.error(`wharf: sync ${repo}#${n}: another run holds the lease (${r.busy})`);
        code = 1;
        continue;
      }
      console.log(formatSyncRun(repo, n, r.record));
      if (r.record.outcome !== "ok") code = 1;
    }
    return code;
  } finally {
    await registry.close();
    kv.close();
  }
}

/**
 * `main.ts worker [--queue Q]...`: drains queues without serving HTTP, so several processes
 * share the work through one KV. Stops on SIGTERM/SIGINT after running jobs finish (or their
 * grace runs out; their leases then expire and another worker takes them over).
 */
async function worker(cfg: Config, queues: QueueName[]): Promise<void> {
  const fsStore = await openBlobStore(cfg);
  const metrics = new Metrics();
  const kv = await openMetadata(cfg.metadataStore.url ?? cfg.metadataStore.path);
  const jobs = jobQueues(cfg, kv, metrics);
  const registry = new Registry(
    cfg,
    kv,
    new InstrumentedBlobStore(fsStore, metrics.observeBlobStore),
    registryOptions(jobs, metrics),
  );
  const replicator = registerJobHandlers(cfg, registry, metrics);
  new LayerIndex(cfg, registry).register();
  const reports = new Reports(cfg, registry);
  reports.register();
  reports.watchAdvisories();
  const drained = queues.length ? queues : [...JOB_QUEUES];
  const runner = jobs.start(holderName("worker"), drained);
  const outbox = drained.includes("events") ? drainOutbox(cfg, kv, registry, "worker") : null;
  // Listening before the startup line: a stop sent as soon as it shows is a stop, not a kill.
  const stopped = new Promise<void>((resolve) => {
    Deno.addSignalListener("SIGTERM", resolve);
    Deno.addSignalListener("SIGINT", resolve);
  });
  const concurrency = cfg.global.jobQueue.concurrency;
  const lanes = runner.queues.map((q) => `${q} (${concurrency[q]} at a time)`).join(", ");
  console.log(
    `wharf worker draining ${lanes || "no job queue (every concurrency is 0)"}${
      outbox ? " and the webhook outbox" : ""
    }; serving no HTTP (${describe(cfg, false)})`,
  );
  console.log("press Ctrl+C to stop");
  await stopped;
  console.log("wharf worker stopping: finishing running jobs");
  reports.stop();
  await jobs.stop();
  await outbox?.stop();
  replicator.close();
  await registry.close();
  kv.close();
  console.log("wharf worker stopped");
}

/**
 * A scrubber that also applies pull-history retention and drops what was derived from reclaimed
 * bytes (layer index, file-search keys, image report); `holder` as in Scrubber.
 */
function scrubberFor(cfg: Config, kv: Deno.Kv, store: BlobStore, holder?: string): Scrubber {
  const audit = new AuditTrail(kv, cfg);
  return new Scrubber(cfg, kv, store, (dryRun) => sweepPullHistory(kv, cfg, { dryRun }), holder)
    .onReclaim((d) => forgetLayerIndex(kv, store, d))
    .onManifestRecords((dryRun, live, since) => sweepReports(kv, store, dryRun, live, since))
    .onFinished(async (s) => {
      const old = await audit.sweep(s.dryRun);
      const dropped = `${s.dryRun ? "would drop" : "dropped"} ${old.dropped} audit record(s)`;
      await audit.record({ action: "scrub.run", detail: `${formatSummary(s)}; ${dropped}` });
    });
}

/** The server's own lease name: a restarted server resumes the scrub lease of the one it replaces. */
const SERVE_SCRUB_HOLDER = "wharf serve";

/** `[global.scrub] interval_secs`: scrub inside the server, one run at a time. */
function scheduleScrub(
  cfg: Config,
  scrubber: Scrubber,
  signal: AbortSignal,
  metrics: Metrics,
): () => void {
  const every = cfg.global.scrub.intervalSecs;
  if (every === null) return () => {};
  let running = false;
  const timer = setInterval(async () => {
    if (running || signal.aborted) return;
    running = true;
    const t0 = performance.now();
    try {
      const s = await scrubber.run();
      if (s) {
        log.info(formatSummary(s));
        metrics.scrubFinished({
          ok: true,
          seconds: s.seconds,
          reclaimed: {
            blobs: s.blobs,
            bytes: s.bytes,
            uploads: s.uploads,
            namespaces: s.namespaces,
            pulls: s.pulls,
          },
        });
      }
    } catch (e) {
      log.error("scheduled scrub failed", { error: e instanceof Error ? e.message : String(e) });
      metrics.scrubFinished({ ok: false, seconds: (performance.now() - t0) / 1000, reclaimed: {} });
    } finally {
      running = false;
    }
  }, every * 1000);
  return () => clearInterval(timer);
}

/**
 * `[global.retention_policy] interval_secs`: prune inside the server, one run at a time. The
 * interval is read on each tick, so a reload that changes the rules applies to the next run.
 */
function schedulePrune(cfg: Config, registry: Registry, signal: AbortSignal): () => void {
  const every = cfg.global.retentionSchedule.intervalSecs;
  if (every === null) return () => {};
  let running = false;
  const timer = setInterval(async () => {
    if (running || signal.aborted) return;
    running = true;
    try {
      const dryRun = cfg.global.retentionSchedule.dryRun;
      const s = await auditedRun(registry.events.audit, "prune.run", () =>
        prune(cfg, registry, {
          dryRun,
          signal,
          report: (line) => log.info(`retention: ${dryRun ? "would " : ""}${line}`),
        }), (s) => formatPrune(s, dryRun));
      log.info(formatPrune(s, dryRun));
    } catch (e) {
      log.error("scheduled prune failed", { error: e instanceof Error ? e.message : String(e) });
    } finally {
      running = false;
    }
  }, every * 1000);
  return () => clearInterval(timer);
}

/**
 * `main.ts prune [--dry-run] [--now T]`: deletes the tags no retention rule keeps (and the
 * manifests left untagged) through the normal delete path; their events are queued like any
 * delete's. Refuses to start when a rule reads pull times that are not recorded.
 */
async function pruneCommand(cfg: Config, cli: Cli): Promise<number> {
  let rules;
  try {
    validated(cfg);
    rules = compileRetention(cfg);
  } catch (e) {
    if (!(e instanceof RetentionCompileError) && !(e instanceof PolicyCompileError)) throw e;
    console.error(`wharf: config ${cfg.sources.join(", ")}: ${e.message}`);
    return 2;
  }
  const key = pullTimesWithoutRecording(cfg, rules);
  if (key) {
    console.error(
      `wharf: prune: ${key} reads pull times (image.last_pulled_at, top_pulled) but global.update_pull_time is off, so none are recorded; turn it on or change the rules`,
    );
    return 2;
  }
  if (rules.size === 0) {
    console.error("wharf: prune: no [global.retention_policy] or repository retention_policy");
    return 2;
  }
  const store = await openBlobStore(cfg);
  const kv = await openMetadata(cfg.metadataStore.url ?? cfg.metadataStore.path);
  const registry = new Registry(cfg, kv, store);
  try {
    const s = await auditedRun(registry.events.audit, "prune.run", () =>
      prune(cfg, registry, {
        dryRun: cli.dryRun,
        now: cli.now ?? undefined,
        report: (line) => console.log(`${cli.dryRun ? "would " : ""}${line}`),
      }), (s) => formatPrune(s, cli.dryRun));
    console.log(formatPrune(s, cli.dryRun));
    return s.failures > 0 ? 1 : 0;
  } finally {
    await registry.close();
    kv.close();
  }
}

/** `main.ts scrub`: one pass against the configured stores, safe while servers run. */
async function scrub(cfg: Config, dryRun: boolean): Promise<number> {
  const store = await openBlobStore(cfg);
  const kv = await openMetadata(cfg.metadataStore.url ?? cfg.metadataStore.path);
  try {
    const s = await scrubberFor(cfg, kv, store).run({ dryRun });
    if (!s) {
      console.error("wharf: another scrub holds the lease; try again later");
      return 1;
    }
    console.log(formatSummary(s));
    return 0;
  } finally {
    kv.close();
  }
}

/** The password from standard input (first line), so it never shows in argv or shell history. */
async function readPassword(): Promise<string> {
  if (Deno.stdin.isTerminal()) await Deno.stderr.write(new TextEncoder().encode("password: "));
  const text = await new Response(Deno.stdin.readable).text();
  const pw = text.split(/\r?\n/)[0];
  if (!pw) throw new ConfigError("hash-password: empty password on standard input");
  return pw;
}

async function main(): Promise<number> {
  let cli: Cli;
  let cfg: Config;
  try {
    cli = parseArgs(Deno.args);
    if (cli.help) {
      const known = cli.command === "" || COMMANDS.includes(cli.command);
      if (!known) console.error(`wharf: unknown command ${cli.command}`);
      console.log(helpText(known ? cli.command || null : null));
      return known ? 0 : 2;
    }
    if (cli.configFiles.length) cfg = await loadConfigFiles(cli.configFiles);
    else {
      // No config file at all: a newcomer's browser should find the UI (DESIGN.md §Repositories),
      // and reports their advisories, fetched from osv.dev daily.
      cfg = defaultConfig();
      cfg.ui.enabled = true;
      cfg.scan.advisoriesDir = "./data/advisories";
      cfg.scan.refreshIntervalSecs = 86_400;
    }
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(`wharf: ${e.message}`);
      return 2;
    }
    throw e;
  }
  switch (cli.command) {
    case "serve":
      try {
        await serve(cfg);
      } catch (e) {
        const listen = e instanceof ListenError ? e : listenError(cfg, e);
        if (listen) {
          console.error(`wharf: ${listen.message}`);
          return 1;
        }
        // A bad rule or an unreadable upstream ca_bundle stops startup with a message.
        if (
          !(e instanceof PolicyCompileError) && !(e instanceof RetentionCompileError) &&
          !isUpstreamError(e)
        ) throw e;
        console.error(`wharf: config ${cfg.sources.join(", ")}: ${e.message}`);
        return 2;
      }
      return 0;
    case "scrub":
      return await scrub(cfg, cli.dryRun);
    case "prune":
      return await pruneCommand(cfg, cli);
    case "replicate":
      return await replicate(cfg, cli.dryRun);
    case "sync":
      return await syncCommand(cfg, cli);
    case "reindex":
      return await reindex(cfg, cli.dryRun, cli.force);
    case "scan":
      return await scan(cfg, cli);
    case "worker":
      try {
        await worker(cfg, cli.queues);
      } catch (e) {
        if (!isUpstreamError(e)) throw e;
        console.error(`wharf: config ${cfg.sources.join(", ")}: ${e.message}`);
        return 2;
      }
      return 0;
    case "hash-password":
      console.log(await hashPassword(await readPassword()));
      return 0;
    case "advisories": {
      const r = await advisoriesCommand(cfg, cli);
      for (const line of r.out) console.log(line);
      for (const line of r.err) console.error(line);
      return r.code;
    }
    default:
      console.error(
        `wharf: unknown command ${cli.command} (commands: ${COMMANDS.join(", ")}; main.ts --help)`,
      );
      return 2;
  }
}

if (import.meta.main) Deno.exit(await main());
