// Wharf's instruments under stable names. The edge, the stores and scrub report through the
// methods here; `render()` is the /metrics body.
import { EventLoopLag } from "./event_loop.ts";
import { Counter, Gauge, Histogram, InstrumentSet } from "./instruments.ts";

/** Request latency: a manifest HEAD from KV (~0.5 ms) up to a slow blob upload (30 s). */
export const REQUEST_BUCKETS = [
  0.0005,
  0.001,
  0.0025,
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  30,
];
/** Store operations: a KV get is ~20 µs locally, a remote KV or S3 call tens of ms. */
export const STORE_BUCKETS = [
  0.00005,
  0.0001,
  0.00025,
  0.0005,
  0.001,
  0.0025,
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  1,
  5,
];

export const SCRUB_KINDS = ["blobs", "bytes", "uploads", "links", "namespaces", "pulls"] as const;

export interface ScrubResult {
  ok: boolean;
  seconds: number;
  /** per kind (SCRUB_KINDS; others are exported too) */
  reclaimed: Record<string, number>;
}

export type AuthResultLabel = "ok" | "failed" | "anonymous";

/** One repository's storage as the repositories listing reports it (issue 26). */
export interface RepositoryUsageFigures {
  repository: string;
  used: number;
  quota: number | null;
  cache: number | null;
}

/** One sync entry's figures as the status view reports them (lib/sync SyncStatus). */
export interface SyncFigures {
  repository: string;
  last_run: string | null;
  next_run: string | null;
  last_outcome: string | null;
  tags_fetched: number;
}

/** One store's state as lib/storage's StoreWatch reports it (issue 38). */
export interface StoreFigures {
  store: string;
  /** bytes free on its filesystem; null: not on a local filesystem (S3, KV Connect) */
  freeBytes: number | null;
  reserveBytes: number | null;
  available: boolean;
}

/** The stores StoreFigures name: the blob store's bytes and the metadata KV. */
const BLOB_STORE = "blob";
const STORE_NAMES = [BLOB_STORE, "metadata"];

/** Writes a store refused, by store and cause (reserve, full, unavailable, locked, read_only). */
export interface StoreRefusals {
  store: string;
  cause: string;
  n: number;
}

/** One downstream's figures as the replication status view reports them. */
export interface ReplicationFigures {
  name: string;
  pending: number;
  failed: number;
  outcomes: Record<string, number>;
  /** RFC 3339, null: never */
  last_success_at: string | null;
}

export class Metrics {
  readonly contentType = "text/plain; version=0.0.4; charset=utf-8";
  private readonly set = new InstrumentSet();

  readonly requests = this.set.add(
    new Counter(
      "wharf_http_requests_total",
      "HTTP requests answered, by action, method and status",
      [
        "action",
        "method",
        "status",
      ],
    ),
  );
  readonly requestDuration = this.set.add(
    new Histogram(
      "wharf_http_request_duration_seconds",
      "Time from request to response headers, by action",
      ["action"],
      REQUEST_BUCKETS,
    ),
  );
  readonly inFlight = this.set.add(
    new Gauge(
      "wharf_http_requests_in_flight",
      "Requests being handled (up to response headers)",
      [],
    ),
  );
  /** 429s of the rate limiter (lib/ratelimit), by bucket class: requests or pulls */
  readonly rateLimited = this.set.add(
    new Counter(
      "wharf_rate_limited_requests_total",
      "Requests refused with 429 by the rate limits, by class (requests, pulls)",
      ["class"],
    ),
  );
  /** KV operations of the rate limiter's settles and first loads, by kind */
  readonly rateLimitKvOps = this.set.add(
    new Counter(
      "wharf_rate_limit_kv_operations_total",
      "KV operations made by the rate limiter (gets, commits, conflicts)",
      ["op"],
    ),
  );
  readonly requestBytes = this.set.add(
    new Counter("wharf_http_request_bytes_total", "Request body bytes read by handlers", []),
  );
  readonly responseBytes = this.set.add(
    new Counter("wharf_http_response_bytes_total", "Response body bytes streamed to clients", []),
  );
  readonly authAttempts = this.set.add(
    new Counter("wharf_auth_attempts_total", "Authentication attempts by method and result", [
      "method",
      "result",
    ]),
  );
  private readonly outboxPending = this.set.add(
    new Gauge(
      "wharf_event_outbox_pending",
      "Async webhook deliveries not yet made (due or backing off), per webhook; counted up to 10000",
      ["webhook"],
    ),
  );
  private readonly authzWebhookDecisions = this.set.add(
    new Counter(
      "wharf_authorization_webhook_decisions_total",
      "Authorization webhook decisions by webhook and decision (allow, deny, cached-deny, error)",
      ["webhook", "decision"],
    ),
  );
  private readonly authzWebhookDuration = this.set.add(
    new Histogram(
      "wharf_authorization_webhook_duration_seconds",
      "Authorization webhook calls (cached denials excluded) by webhook",
      ["webhook"],
      REQUEST_BUCKETS,
    ),
  );
  readonly uploadSessions = this.set.add(
    new Gauge("wharf_upload_sessions_open", "Upload sessions recorded in the metadata store", []),
  );
  readonly advisoryRecords = this.set.add(
    new Gauge(
      "wharf_advisory_records",
      "OSV records and package entries in the current advisory snapshot",
      ["kind"],
    ),
  );
  readonly advisoryLoad = this.set.add(
    new Gauge("wharf_advisory_load_seconds", "Duration of the current snapshot's load", []),
  );
  readonly advisoryLoadedAt = this.set.add(
    new Gauge(
      "wharf_advisory_loaded_timestamp_seconds",
      "When the current advisory snapshot was loaded (0: none)",
      [],
    ),
  );
  readonly kvDuration = this.set.add(
    new Histogram(
      "wharf_kv_operation_duration_seconds",
      "Deno KV operation latency by operation",
      ["op"],
      STORE_BUCKETS,
    ),
  );
  private readonly commitRetries = this.set.add(
    new Gauge(
      "wharf_kv_commit_retries",
      "Conflicted KV commit attempts and given-up changes since the process started, by operation",
      ["op", "outcome"],
    ),
  );
  private readonly storeFree = this.set.add(
    new Gauge(
      "wharf_store_free_bytes",
      "Bytes free on the filesystem of the blob store and of the KV file (local ones only)",
      ["store"],
    ),
  );
  private readonly storeReserve = this.set.add(
    new Gauge(
      "wharf_store_reserve_bytes",
      "Free bytes under which new uploads are refused ([blob_store] min_free_bytes)",
      ["store"],
    ),
  );
  private readonly storeAvailable = this.set.add(
    new Gauge(
      "wharf_store_available",
      "1 while the store takes writes; 0 while below its reserve or failing (as /readyz says)",
      ["store"],
    ),
  );
  private readonly storeRefusals = this.set.add(
    new Counter(
      "wharf_store_refusals_total",
      "Writes refused because a store could not take them, by store and cause",
      ["store", "cause"],
    ),
  );
  readonly blobStoreDuration = this.set.add(
    new Histogram(
      "wharf_blob_store_operation_duration_seconds",
      "Blob store operation latency by operation (stream reads: until the stream is open)",
      ["op"],
      STORE_BUCKETS,
    ),
  );
  readonly scrubRuns = this.set.add(
    new Counter("wharf_scrub_runs_total", "Scrub runs by result", ["result"]),
  );
  readonly scrubReclaimed = this.set.add(
    new Counter("wharf_scrub_reclaimed_total", "Items reclaimed by scrub, by kind", ["kind"]),
  );
  readonly scrubLastRun = this.set.add(
    new Gauge(
      "wharf_scrub_last_run_timestamp_seconds",
      "When the last scrub run in this process finished",
      [],
    ),
  );
  readonly scrubDuration = this.set.add(
    new Gauge("wharf_scrub_duration_seconds", "Duration of the last scrub run in this process", []),
  );
  private readonly integrityFailures = this.set.add(
    new Counter(
      "wharf_integrity_failures_total",
      "Stored objects whose bytes did not match their digest (or checksum) when read here, by object; never served",
      ["object"],
    ),
  );
  private readonly quarantinedTotal = this.set.add(
    new Counter(
      "wharf_quarantined_total",
      "Digests this process took out of serving because their stored bytes did not match, by object",
      ["object"],
    ),
  );
  private readonly quarantinedNow = this.set.add(
    new Gauge(
      "wharf_quarantined_objects",
      "Digests quarantined now: not served until pushed or fetched from an upstream again",
      [],
    ),
  );
  private readonly verifyRuns = this.set.add(
    new Counter("wharf_verify_runs_total", "Verify runs in this process by result", ["result"]),
  );
  private readonly verifyBytes = this.set.add(
    new Counter("wharf_verify_bytes_total", "Stored bytes re-hashed by verify in this process", []),
  );
  private readonly verifyLastPass = this.set.add(
    new Gauge(
      "wharf_verify_last_pass_timestamp_seconds",
      "When the last complete verify pass in this process finished",
      [],
    ),
  );
  readonly residentMemory = this.set.add(
    new Gauge("process_resident_memory_bytes", "Resident memory size in bytes", []),
  );
  readonly heap = this.set.add(
    new Gauge("wharf_heap_bytes", "V8 heap and external memory in bytes", ["kind"]),
  );
  readonly startTime = this.set.add(
    new Gauge("process_start_time_seconds", "Start time of the process since the epoch", []),
  );

  // Hot-path series kept once so a request does one Map lookup per labelled instrument.
  private readonly inFlightS = this.inFlight.series([]);
  private readonly requestBytesS = this.requestBytes.series([]);
  private readonly responseBytesS = this.responseBytes.series([]);

  private readonly jobsPending = this.set.add(
    new Gauge("wharf_jobs_pending", "Pending and in-flight jobs per queue (census capped)", [
      "queue",
    ]),
  );
  private readonly jobsFailed = this.set.add(
    new Gauge("wharf_jobs_failed", "Dead-lettered jobs per queue (census capped)", ["queue"]),
  );
  private readonly jobsOldest = this.set.add(
    new Gauge(
      "wharf_jobs_oldest_pending_seconds",
      "How long the earliest pending job of a queue has been due (0: none overdue)",
      ["queue"],
    ),
  );
  private readonly jobsEnqueued = this.set.add(
    new Counter(
      "wharf_jobs_enqueued_total",
      "Enqueue calls per queue; result dedup means a pending job of the lock key existed",
      ["queue", "result"],
    ),
  );
  private readonly jobsClaims = this.set.add(
    new Counter("wharf_jobs_claims_total", "Jobs claimed by workers of this process", ["queue"]),
  );
  private readonly jobsOutcomes = this.set.add(
    new Counter(
      "wharf_jobs_outcomes_total",
      "Finished job runs by outcome (ok, retry, failed = dead-lettered, lost = lease lost)",
      ["queue", "outcome"],
    ),
  );
  private readonly jobsPoisoned = this.set.add(
    new Counter("wharf_jobs_poisoned_total", "Stored values that were not jobs", ["queue"]),
  );
  private readonly jobsDuration = this.set.add(
    new Histogram("wharf_jobs_run_duration_seconds", "Job run time by queue", ["queue"], [
      0.001,
      0.01,
      0.1,
      0.5,
      1,
      5,
      30,
      120,
      600,
    ]),
  );
  /** issue 26: storage per repository (with any quota or cache cap configured), at scrape time */
  private readonly repositoryUsed = this.set.add(
    new Gauge(
      "wharf_repository_used_bytes",
      "Bytes a repository holds, each distinct digest once (shown when quotas or cache caps are configured)",
      ["repository"],
    ),
  );
  private readonly repositoryLimit = this.set.add(
    new Gauge(
      "wharf_repository_limit_bytes",
      "A repository's storage limit by kind: quota (pushes refused past it) or cache (evicted under it)",
      ["repository", "kind"],
    ),
  );
  private readonly cacheEvictions = this.set.add(
    new Counter(
      "wharf_cache_evictions_total",
      "Cached images evicted to keep a pull-through repository under max_cache_bytes",
      ["repository"],
    ),
  );
  /** issue 34: signature verdicts and holds */
  private readonly signatureVerdicts = this.set.add(
    new Counter(
      "wharf_signature_verdicts_total",
      "Signature verdicts stored, by repository and result (verified, unverified, artifact)",
      ["repository", "result"],
    ),
  );
  private readonly signatureHolds = this.set.add(
    new Counter(
      "wharf_signature_holds_total",
      "Held images by repository and event: held, released (a signature verified), rejected (deleted when the hold ran out), kept (still held when it ran out), denied (a pull refused)",
      ["repository", "event"],
    ),
  );
  private readonly signatureVerifySeconds = this.set.add(
    new Histogram(
      "wharf_signature_verify_seconds",
      "Wall time of verifying one image's signatures (finding and reading its artifacts included)",
      [],
      [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
    ),
  );
  private readonly pullThrough = this.set.add(
    new Counter(
      "wharf_pull_through_total",
      "Pull-through answers by kind (manifest, blob) and result (hit, miss, revalidated, stale, error)",
      ["kind", "result"],
    ),
  );
  private readonly upstreamDuration = this.set.add(
    new Histogram(
      "wharf_upstream_request_duration_seconds",
      "Upstream requests by upstream, operation and outcome",
      ["upstream", "op", "outcome"],
      REQUEST_BUCKETS,
    ),
  );

  private readonly replicationOutcomes = this.set.add(
    new Counter(
      "wharf_replication_jobs_total",
      "Replication job runs per downstream by outcome (pushed, deleted, superseded, skipped, tag-delete-unsupported, delete-unsupported, failed)",
      ["downstream", "outcome"],
    ),
  );
  private readonly replicationBytes = this.set.add(
    new Counter("wharf_replication_bytes_total", "Blob bytes uploaded to a downstream", [
      "downstream",
    ]),
  );
  private readonly replicationLastSuccess = this.set.add(
    new Gauge(
      "wharf_replication_last_success_timestamp_seconds",
      "When a replication job to the downstream last succeeded (any process, as the status view reports; this process's own when later)",
      ["downstream"],
    ),
  );
  private readonly replicationLag = this.set.add(
    new Gauge(
      "wharf_replication_lag_seconds",
      "Age of the oldest pending replication job per downstream (0: none pending)",
      ["downstream"],
    ),
  );
  // The status view's figures (GET /v2/_svc/replication/status), read from KV at scrape time:
  // the same numbers across every process.
  private readonly replicationPending = this.set.add(
    new Gauge(
      "wharf_replication_pending_jobs",
      "Pending replication jobs per downstream (as the status view counts them)",
      ["downstream"],
    ),
  );
  private readonly replicationFailed = this.set.add(
    new Gauge(
      "wharf_replication_failed_jobs",
      "Dead-lettered replication jobs per downstream",
      ["downstream"],
    ),
  );
  private readonly replicationRecorded = this.set.add(
    new Gauge(
      "wharf_replication_outcomes",
      "Replication job runs per downstream by outcome, across all processes (the status view's counts)",
      ["downstream", "outcome"],
    ),
  );

  // Scheduled pull syncs (lib/sync), as the status view reports them, read from KV at scrape time.
  private readonly syncLastRun = this.set.add(
    new Gauge(
      "wharf_sync_last_run_timestamp_seconds",
      "When the sync entry's last run ended (0: never)",
      ["repository", "entry"],
    ),
  );
  private readonly syncNextRun = this.set.add(
    new Gauge(
      "wharf_sync_next_run_timestamp_seconds",
      "When the sync entry runs next (0: at startup)",
      ["repository", "entry"],
    ),
  );
  private readonly syncTagsFetched = this.set.add(
    new Gauge(
      "wharf_sync_tags_fetched",
      "Tags the sync entry's last run fetched (new or moved)",
      ["repository", "entry"],
    ),
  );
  private readonly syncFailing = this.set.add(
    new Gauge(
      "wharf_sync_failing",
      "1 when the sync entry's last run did not end ok (failed, partial or rate-limited)",
      ["repository", "entry"],
    ),
  );

  private readonly loopLag = this.set.add(
    new Gauge(
      "wharf_event_loop_lag_seconds",
      "How late the serving thread ran a 50 ms timer over the last minute (p99, max)",
      ["quantile"],
    ),
  );
  /** Watched once serving starts (`watchEventLoop`). */
  readonly eventLoop = new EventLoopLag();

  /** Starts measuring event-loop lag (stopped with `stopWatching`). */
  watchEventLoop(): void {
    this.eventLoop.start();
    this.loopLag.collect = () => {
      const { p99, max } = this.eventLoop.summary();
      this.loopLag.set(p99, ["0.99"]);
      this.loopLag.set(max, ["1"]);
    };
  }

  stopWatching(): void {
    this.eventLoop.stop();
  }

  constructor() {
    this.startTime.set(Math.round(Date.now() / 1000 - performance.now() / 1000));
    for (const k of SCRUB_KINDS) this.scrubReclaimed.inc([k], 0);
    for (const r of ["ok", "failed"]) this.scrubRuns.inc([r], 0);
    for (const r of ["complete", "stopped", "failed"]) this.verifyRuns.inc([r], 0);
    this.verifyBytes.inc([], 0);
    this.uploadSessions.set(0);
    this.residentMemory.collect = () => {
      const m = Deno.memoryUsage();
      this.residentMemory.set(m.rss);
      this.heap.set(m.heapUsed, ["used"]);
      this.heap.set(m.heapTotal, ["total"]);
      this.heap.set(m.external, ["external"]);
    };
  }

  requestStarted(): void {
    this.inFlightS.v++;
  }

  /** A response's headers are out (or the request failed before any). */
  requestFinished(action: string, method: string, status: number, seconds: number): void {
    this.inFlightS.v--;
    this.requests.inc([action, method, String(status)]);
    this.requestDuration.observe(seconds, [action]);
  }

  bytesIn(n: number): void {
    this.requestBytesS.v += n;
  }

  bytesOut(n: number): void {
    this.responseBytesS.v += n;
  }

  authAttempt(method: string, result: AuthResultLabel): void {
    this.authAttempts.inc([method, result]);
  }

  /** Callbacks for the store decorators: `observe(op, seconds)`. */
  readonly observeKv = (op: string, seconds: number): void =>
    this.kvDuration.observe(seconds, [op]);
  readonly observeBlobStore = (op: string, seconds: number): void =>
    this.blobStoreDuration.observe(seconds, [op]);

  /** Counted lazily at scrape time; the callback bounds its own work. */
  countUploadSessionsWith(count: () => Promise<number>): void {
    this.uploadSessions.collect = async () => this.uploadSessions.set(await count());
  }

  /** commitWithRetry's counters (lib/metadata), read at scrape time. */
  commitRetriesFrom(read: () => ReadonlyMap<string, { conflicts: number; exhausted: number }>) {
    this.commitRetries.collect = () => {
      for (const [op, c] of read()) {
        this.commitRetries.set(c.conflicts, [op, "conflict"]);
        this.commitRetries.set(c.exhausted, [op, "exhausted"]);
      }
    };
  }

  /** The stores' free space, availability and refusals (lib/storage StoreWatch), at scrape. */
  storesFrom(read: () => Promise<StoreFigures[]>, refusals: () => Iterable<StoreRefusals>): void {
    for (const store of STORE_NAMES) this.storeAvailable.set(1, [store]);
    this.storeAvailable.collect = async () => {
      for (const f of await read()) {
        this.storeAvailable.set(f.available ? 1 : 0, [f.store]);
        if (f.freeBytes !== null) this.storeFree.set(f.freeBytes, [f.store]);
        if (f.reserveBytes !== null) this.storeReserve.set(f.reserveBytes, [f.store]);
      }
      for (const r of refusals()) this.storeRefusals.series([r.store, r.cause]).v = r.n;
    };
  }

  /** The advisory snapshot's figures, read at scrape time (one KV get). */
  advisoriesWith(
    meta: () => Promise<
      { records: number; affected: number; load_ms: number; loaded_at: number } | null
    >,
  ): void {
    this.advisoryRecords.collect = async () => {
      const m = await meta();
      this.advisoryRecords.set(m?.records ?? 0, ["records"]);
      this.advisoryRecords.set(m?.affected ?? 0, ["package_entries"]);
      this.advisoryLoad.set((m?.load_ms ?? 0) / 1000);
      this.advisoryLoadedAt.set((m?.loaded_at ?? 0) / 1000);
    };
  }

  /** Job census read at scrape time; `census` bounds its own work. */
  countJobsWith(
    queues: readonly string[],
    census: (q: string) => Promise<{ pending: number; failed: number; oldestDueSecs: number }>,
  ): void {
    this.jobsPending.collect = async () => {
      for (const q of queues) {
        const c = await census(q);
        this.jobsPending.set(c.pending, [q]);
        this.jobsFailed.set(c.failed, [q]);
        this.jobsOldest.set(c.oldestDueSecs, [q]);
      }
    };
  }

  /** Callbacks for JobQueues (enqueue, claim, poison) and its runners (outcome, duration). */
  readonly jobEvents = {
    enqueued: (queue: string, dedup: boolean) =>
      this.jobsEnqueued.inc([queue, dedup ? "dedup" : "new"]),
    claimed: (queue: string) => this.jobsClaims.inc([queue]),
    poisoned: (queue: string) => this.jobsPoisoned.inc([queue]),
    finished: (queue: string, _kind: string, outcome: string, seconds: number) => {
      this.jobsOutcomes.inc([queue, outcome]);
      this.jobsDuration.observe(seconds, [queue]);
    },
  };

  /** Callbacks for the Replicator. */
  readonly replicationEvents = {
    outcome: (downstream: string, outcome: string) => {
      this.replicationOutcomes.inc([downstream, outcome]);
      if (outcome !== "failed") this.replicationLastSuccess.set(Date.now() / 1000, [downstream]);
    },
    bytes: (downstream: string, n: number) => this.replicationBytes.inc([downstream], n),
    /** The status view's per-downstream figures, read when metrics are scraped. */
    statusFrom: (read: () => Promise<ReplicationFigures[]>) => {
      this.replicationPending.collect = async () => {
        for (const d of await read()) {
          this.replicationPending.set(d.pending, [d.name]);
          this.replicationFailed.set(d.failed, [d.name]);
          for (const [outcome, n] of Object.entries(d.outcomes)) {
            this.replicationRecorded.set(n, [d.name, outcome]);
          }
          if (d.last_success_at !== null) {
            const at = Date.parse(d.last_success_at) / 1000;
            const mine = this.replicationLastSuccess.get([d.name]);
            this.replicationLastSuccess.set(Math.max(at, mine), [d.name]);
          }
        }
      };
    },
  };

  /** The sync entries' figures (lib/sync syncStatus, in config order), read at scrape time. */
  syncStatusFrom(read: () => Promise<SyncFigures[]>): void {
    this.syncLastRun.collect = async () => {
      const counts = new Map<string, number>();
      for (const s of await read()) {
        const n = counts.get(s.repository) ?? 0;
        counts.set(s.repository, n + 1);
        const l = [s.repository, String(n)];
        this.syncLastRun.set(s.last_run ? Date.parse(s.last_run) / 1000 : 0, l);
        this.syncNextRun.set(s.next_run ? Date.parse(s.next_run) / 1000 : 0, l);
        this.syncTagsFetched.set(s.tags_fetched, l);
        this.syncFailing.set(s.last_outcome !== null && s.last_outcome !== "ok" ? 1 : 0, l);
      }
    };
  }

  /** Replication lag per downstream at scrape time; `oldest` bounds its own work. */
  replicationLagWith(
    downstreams: readonly string[],
    oldest: () => Promise<Map<string, number>>,
  ): void {
    for (const d of downstreams) this.replicationLag.set(0, [d]);
    this.replicationLag.collect = async () => {
      const ages = await oldest();
      for (const d of downstreams) this.replicationLag.set(ages.get(d) ?? 0, [d]);
    };
  }

  /** Undelivered events per webhook at scrape time (lib/events countOutbox). */
  outboxPendingWith(count: () => Promise<Map<string, number>>): void {
    this.outboxPending.collect = async () => {
      for (const [webhook, n] of await count()) this.outboxPending.set(n, [webhook]);
    };
  }

  /** Callback for the authorization webhook (lib/auth AuthorizationWebhooks). */
  readonly observeAuthzWebhook = (webhook: string, decision: string, seconds: number): void => {
    this.authzWebhookDecisions.inc([webhook, decision]);
    if (decision !== "cached-deny") this.authzWebhookDuration.observe(seconds, [webhook]);
  };

  /** Usage per repository, read at scrape time; `read` bounds its own work. */
  repositoryUsageWith(read: () => Promise<RepositoryUsageFigures[]>): void {
    this.repositoryUsed.collect = async () => {
      for (const r of await read()) {
        this.repositoryUsed.set(r.used, [r.repository]);
        if (r.quota !== null) this.repositoryLimit.set(r.quota, [r.repository, "quota"]);
        if (r.cache !== null) this.repositoryLimit.set(r.cache, [r.repository, "cache"]);
      }
    };
  }

  /** Verdicts, holds and verification time of signatures (lib/registry SignatureObserver). */
  readonly signatures = {
    verdict: (repository: string, result: string): void =>
      this.signatureVerdicts.inc([repository, result]),
    hold: (repository: string, event: string): void => this.signatureHolds.inc([repository, event]),
    verifySeconds: (seconds: number): void => this.signatureVerifySeconds.observe(seconds, []),
  };

  readonly cacheEvicted = (repository: string, images: number): void =>
    this.cacheEvictions.inc([repository], images);

  pullThroughResult(kind: "manifest" | "blob", result: string): void {
    this.pullThrough.inc([kind, result]);
  }

  readonly observeUpstream = (
    upstream: string,
    op: string,
    outcome: string,
    seconds: number,
  ): void => this.upstreamDuration.observe(seconds, [upstream, op, outcome]);

  /**
   * Integrity figures (lib/storage's counts, read at scrape time) and the quarantined digests
   * now (one bounded KV listing).
   */
  integrityFrom(
    counts: () => {
      failures: ReadonlyMap<string, number>;
      quarantined: ReadonlyMap<string, number>;
    },
    quarantinedNow: () => Promise<number>,
  ): void {
    for (const o of ["manifest", "blob", "index-table"]) this.integrityFailures.inc([o], 0);
    for (const o of ["manifest", "blob"]) this.quarantinedTotal.inc([o], 0);
    this.quarantinedNow.set(0);
    this.quarantinedNow.collect = async () => {
      const c = counts();
      for (const [o, n] of c.failures) this.integrityFailures.series([o]).v = n;
      for (const [o, n] of c.quarantined) this.quarantinedTotal.series([o]).v = n;
      this.quarantinedNow.set(await quarantinedNow());
    };
  }

  /** A verify run ended: `complete` when its pass reached the end. */
  verifyFinished(result: "complete" | "stopped" | "failed", bytes: number): void {
    this.verifyRuns.inc([result]);
    this.verifyBytes.inc([], bytes);
    if (result === "complete") this.verifyLastPass.set(Date.now() / 1000);
  }

  scrubFinished(result: ScrubResult): void {
    this.scrubRuns.inc([result.ok ? "ok" : "failed"]);
    for (const [kind, n] of Object.entries(result.reclaimed)) {
      if (n > 0) this.scrubReclaimed.inc([kind], n);
    }
    this.scrubLastRun.set(Date.now() / 1000);
    this.scrubDuration.set(result.seconds);
  }

  render(): Promise<string> {
    return this.set.render();
  }
}
