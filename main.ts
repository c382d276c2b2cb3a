// Wharf's composition root: reads config, opens KV and the blob store, serves.
// Usage: main.ts [serve|worker|replicate|reindex|scan|scrub|prune|hash-password] [-c FILE]...
//        [--dry-run] [--force] [--queue Q]... [--namespace N] [--rescan] [--status] [--now T]
// (later config files win)
import {
  type Config,
  ConfigError,
  ConfigReloader,
  defaultConfig,
  JOB_QUEUES,
  loadConfigFiles,
  type QueueName,
} from "./lib/config/mod.ts";
import { isQueueName, JobQueues } from "./lib/jobs/mod.ts";
import { isUpstreamError } from "./lib/upstream/mod.ts";
import { reconcile, type ReconcileSummary, Replicator } from "./lib/replication/mod.ts";
import { formatSyncRun, Syncer } from "./lib/sync/mod.ts";
import { forgetLayerIndex, LayerIndex } from "./lib/index/mod.ts";
import { Reports, sweepReports } from "./lib/scan/mod.ts";
import {
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
import { countOutbox, OutboxDrainer } from "./lib/events/mod.ts";
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
  };
  let i = 0;
  if (args[0] && !args[0].startsWith("-")) cli.command = args[i++];
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
    } else if (a.startsWith("--config=")) {
      cli.configFiles.push(a.slice("--config=".length));
    } else {
      throw new ConfigError(`unknown argument ${a}`);
    }
  }
  return cli;
}

function describe(cfg: Config): string {
  const p = cfg.global.accessPolicy;
  const policy = p.rules.length === 0
    ? `access policy: ${p.default} all`
    : `access policy: default ${p.default}, ${p.rules.length} rule(s)`;
  const source = cfg.sources.length
    ? `config ${cfg.sources.join(", ")}`
    : "embedded default config";
  return `${source}; blobs ${describeBlobStore(cfg)}; metadata ${
    cfg.metadataStore.url ?? cfg.metadataStore.path
  }; ${policy}; web UI ${cfg.ui.enabled ? "on at /" : "off"}`;
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

async function serve(cfg: Config): Promise<void> {
  const policies = validated(cfg); // compile first: a bad rule stops startup before any I/O
  const fsStore = await openBlobStore(cfg);
  const metrics = new Metrics();
  metrics.watchEventLoop();
  const store = new InstrumentedBlobStore(fsStore, metrics.observeBlobStore);
  const rawKv = await openMetadata(cfg.metadataStore.url ?? cfg.metadataStore.path);
  const kv = instrumentKv(rawKv, metrics.observeKv);
  metrics.countUploadSessionsWith(() => countUploadSessions(rawKv));
  const jobs = jobQueues(cfg, kv, metrics);
  const registry = new Registry(cfg, kv, store, registryOptions(jobs, metrics));
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
    };
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
      const m = await reports.status();
      console.log(
        m
          ? `advisories: snapshot ${m.snapshot} loaded ${
            new Date(m.loaded_at).toISOString()
          } in ${m.load_ms} ms; ${m.records} records, ${m.affected} package entries; ${m.error_count} problem(s)\n` +
            Object.entries(m.ecosystems).map(([e, n]) => `  ${e}: ${n}`).join("\n") +
            (m.errors.length ? `\nproblems:\n  ${m.errors.join("\n  ")}` : "")
          : `advisories: none loaded${
            cfg.scan.advisoriesDir
              ? ` (dir ${cfg.scan.advisoriesDir})`
              : " ([scan] advisories_dir unset)"
          }`,
      );
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
  console.log(
    `wharf worker draining ${runner.queues.join(", ") || "nothing (concurrency 0)"} (${
      describe(cfg)
    })`,
  );
  await new Promise<void>((resolve) => {
    Deno.addSignalListener("SIGTERM", resolve);
    Deno.addSignalListener("SIGINT", resolve);
  });
  reports.stop();
  await jobs.stop();
  await outbox?.stop();
  replicator.close();
  await registry.close();
  kv.close();
}

/**
 * A scrubber that also applies pull-history retention and drops what was derived from reclaimed
 * bytes (layer index, file-search keys, image report); `holder` as in Scrubber.
 */
function scrubberFor(cfg: Config, kv: Deno.Kv, store: BlobStore, holder?: string): Scrubber {
  return new Scrubber(cfg, kv, store, (dryRun) => sweepPullHistory(kv, cfg, { dryRun }), holder)
    .onReclaim((d) => forgetLayerIndex(kv, store, d))
    .onManifestRecords((dryRun, live, since) => sweepReports(kv, store, dryRun, live, since));
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
      const s = await prune(cfg, registry, {
        dryRun,
        signal,
        report: (line) => log.info(`retention: ${dryRun ? "would " : ""}${line}`),
      });
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
    const s = await prune(cfg, registry, {
      dryRun: cli.dryRun,
      now: cli.now ?? undefined,
      report: (line) => console.log(`${cli.dryRun ? "would " : ""}${line}`),
    });
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
    if (cli.configFiles.length) cfg = await loadConfigFiles(cli.configFiles);
    else {
      // No config file at all: a newcomer's browser should find the UI (DESIGN.md §Repositories).
      cfg = defaultConfig();
      cfg.ui.enabled = true;
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
    default:
      console.error(
        `wharf: unknown command ${cli.command} (commands: serve, worker, replicate, reindex, scan, scrub, prune, hash-password)`,
      );
      return 2;
  }
}

if (import.meta.main) Deno.exit(await main());
