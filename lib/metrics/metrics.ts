// Wharf's instruments under stable names. The edge, the stores and scrub report through the
// methods here; `render()` is the /metrics body. Each area's instruments live in their own file
// (http_metrics.ts, store_metrics.ts, registry_metrics.ts, job_metrics.ts,
// maintenance_metrics.ts, replication_metrics.ts, process_metrics.ts); Metrics is the one object
// the process holds, handing each call to its area.
import { InstrumentSet } from "./instruments.ts";
import { HttpMetrics } from "./http_metrics.ts";
import { StoreMetrics } from "./store_metrics.ts";
import { RegistryMetrics } from "./registry_metrics.ts";
import { JobMetrics } from "./job_metrics.ts";
import { MaintenanceMetrics } from "./maintenance_metrics.ts";
import { ReplicationMetrics } from "./replication_metrics.ts";
import { ProcessMetrics } from "./process_metrics.ts";

export class Metrics {
  readonly contentType = "text/plain; version=0.0.4; charset=utf-8";
  private readonly set = new InstrumentSet();
  readonly #http = new HttpMetrics(this.set);
  readonly #stores = new StoreMetrics(this.set);
  readonly #registry = new RegistryMetrics(this.set);
  readonly #jobs = new JobMetrics(this.set);
  readonly #maintenance = new MaintenanceMetrics(this.set);
  readonly #replication = new ReplicationMetrics(this.set);
  readonly #process = new ProcessMetrics(this.set);

  // the edge (http_metrics.ts)
  readonly requests = this.#http.requests;
  readonly requestDuration = this.#http.requestDuration;
  readonly inFlight = this.#http.inFlight;
  readonly rateLimited = this.#http.rateLimited;
  readonly rateLimitKvOps = this.#http.rateLimitKvOps;
  readonly requestBytes = this.#http.requestBytes;
  readonly responseBytes = this.#http.responseBytes;
  readonly authAttempts = this.#http.authAttempts;
  readonly observeAuthzWebhook = this.#http.observeAuthzWebhook;
  requestStarted(): void {
    this.#http.requestStarted();
  }
  requestFinished(...a: Parameters<HttpMetrics["requestFinished"]>): void {
    this.#http.requestFinished(...a);
  }
  bytesIn(n: number): void {
    this.#http.bytesIn(n);
  }
  bytesOut(n: number): void {
    this.#http.bytesOut(n);
  }
  authAttempt(...a: Parameters<HttpMetrics["authAttempt"]>): void {
    this.#http.authAttempt(...a);
  }

  // the stores (store_metrics.ts)
  readonly kvDuration = this.#stores.kvDuration;
  readonly blobStoreDuration = this.#stores.blobStoreDuration;
  readonly observeKv = this.#stores.observeKv;
  readonly observeBlobStore = this.#stores.observeBlobStore;
  commitRetriesFrom(...a: Parameters<StoreMetrics["commitRetriesFrom"]>): void {
    this.#stores.commitRetriesFrom(...a);
  }
  storesFrom(...a: Parameters<StoreMetrics["storesFrom"]>): void {
    this.#stores.storesFrom(...a);
  }

  // what the registry holds and checks (registry_metrics.ts)
  readonly uploadSessions = this.#registry.uploadSessions;
  readonly advisoryRecords = this.#registry.advisoryRecords;
  readonly advisoryLoad = this.#registry.advisoryLoad;
  readonly advisoryLoadedAt = this.#registry.advisoryLoadedAt;
  readonly signatures = this.#registry.signatures;
  readonly cacheEvicted = this.#registry.cacheEvicted;
  readonly observeUpstream = this.#registry.observeUpstream;
  countUploadSessionsWith(...a: Parameters<RegistryMetrics["countUploadSessionsWith"]>): void {
    this.#registry.countUploadSessionsWith(...a);
  }
  advisoriesWith(...a: Parameters<RegistryMetrics["advisoriesWith"]>): void {
    this.#registry.advisoriesWith(...a);
  }
  repositoryUsageWith(...a: Parameters<RegistryMetrics["repositoryUsageWith"]>): void {
    this.#registry.repositoryUsageWith(...a);
  }
  pullThroughResult(...a: Parameters<RegistryMetrics["pullThroughResult"]>): void {
    this.#registry.pullThroughResult(...a);
  }

  // background work (job_metrics.ts)
  readonly jobEvents = this.#jobs.jobEvents;
  countJobsWith(...a: Parameters<JobMetrics["countJobsWith"]>): void {
    this.#jobs.countJobsWith(...a);
  }
  outboxPendingWith(...a: Parameters<JobMetrics["outboxPendingWith"]>): void {
    this.#jobs.outboxPendingWith(...a);
  }

  // scrub, integrity, verify (maintenance_metrics.ts)
  readonly scrubRuns = this.#maintenance.scrubRuns;
  readonly scrubReclaimed = this.#maintenance.scrubReclaimed;
  readonly scrubLastRun = this.#maintenance.scrubLastRun;
  readonly scrubDuration = this.#maintenance.scrubDuration;
  integrityFrom(...a: Parameters<MaintenanceMetrics["integrityFrom"]>): void {
    this.#maintenance.integrityFrom(...a);
  }
  verifyFinished(...a: Parameters<MaintenanceMetrics["verifyFinished"]>): void {
    this.#maintenance.verifyFinished(...a);
  }
  scrubFinished(...a: Parameters<MaintenanceMetrics["scrubFinished"]>): void {
    this.#maintenance.scrubFinished(...a);
  }

  // replication and sync (replication_metrics.ts)
  readonly replicationEvents = this.#replication.replicationEvents;
  syncStatusFrom(...a: Parameters<ReplicationMetrics["syncStatusFrom"]>): void {
    this.#replication.syncStatusFrom(...a);
  }
  replicationLagWith(...a: Parameters<ReplicationMetrics["replicationLagWith"]>): void {
    this.#replication.replicationLagWith(...a);
  }

  // the process (process_metrics.ts)
  readonly residentMemory = this.#process.residentMemory;
  readonly heap = this.#process.heap;
  readonly startTime = this.#process.startTime;
  readonly eventLoop = this.#process.eventLoop;
  watchEventLoop(): void {
    this.#process.watchEventLoop();
  }
  stopWatching(): void {
    this.#process.stopWatching();
  }

  render(): Promise<string> {
    return this.set.render();
  }
}
