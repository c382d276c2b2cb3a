// Live configuration reload (issue 14). The config files are watched and SIGHUP reloads too.
// A new config is loaded and validated in full first: anything wrong keeps the running config, with a log line naming the
// key. Otherwise the reloadable sections are copied into the live Config object, which every
// part of the server reads at call time; what was built once from the old values at startup
// (compiled policies, authenticators, upstream and downstream clients) is rebuilt by the
// `validate` callback's commit. Keys that need a restart keep their old value and say so.
import { log } from "../log.ts";
import { loadConfigFiles } from "./load.ts";
import type { Config } from "./schema.ts";

/**
 * Checks `next` beyond loading (CEL compiles, clients build) and returns what makes it live
 * once it has been copied in; throws to refuse it.
 */
export type Validate = (next: Config) => () => void;

const same = (a: unknown, b: unknown) =>
  JSON.stringify(a, replacer) === JSON.stringify(b, replacer);

function replacer(_k: string, v: unknown): unknown {
  if (v instanceof Map) return [...v.entries()];
  if (v instanceof RegExp) return v.source;
  return v;
}

/**
 * Copies the reloadable sections of `next` into `live`; returns the keys that changed but need
 * a restart (their old values are kept).
 */
export function applyReloadable(live: Config, next: Config): string[] {
  const restart: string[] = [];
  const keep = <T>(key: string, oldV: T, newV: T): T => {
    if (!same(oldV, newV)) restart.push(key);
    return oldV;
  };
  keep("server", live.server, next.server);
  keep("blob_store", live.blobStore, next.blobStore);
  keep("metadata_store", live.metadataStore, next.metadataStore);
  // The job runners, timers and upload limits were built from these at startup.
  next.global.jobQueue = keep("global.job_queue", live.global.jobQueue, next.global.jobQueue);
  next.global.maxBlobSize = keep(
    "global.max_blob_size",
    live.global.maxBlobSize,
    next.global.maxBlobSize,
  );
  next.global.scrub.intervalSecs = keep(
    "global.scrub.interval_secs",
    live.global.scrub.intervalSecs,
    next.global.scrub.intervalSecs,
  );
  next.global.integrity.intervalSecs = keep(
    "global.integrity.interval_secs",
    live.global.integrity.intervalSecs,
    next.global.integrity.intervalSecs,
  );
  next.global.retentionSchedule.intervalSecs = keep(
    "global.retention_policy.interval_secs",
    live.global.retentionSchedule.intervalSecs,
    next.global.retentionSchedule.intervalSecs,
  );
  const scan = { ...next.scan, onPush: live.scan.onPush };
  keep("scan", { ...live.scan }, scan);
  live.global = next.global;
  live.scan = { ...live.scan, onPush: next.scan.onPush };
  live.auth = next.auth;
  live.repositories = next.repositories;
  live.eventWebhooks = next.eventWebhooks;
  live.ui = next.ui;
  return restart;
}

export interface ReloadResult {
  ok: boolean;
  /** why it was refused */
  error?: string;
  /** changed keys that need a restart */
  restart?: string[];
}

export class ConfigReloader {
  private watcher: Deno.FsWatcher | null = null;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private running: Promise<unknown> = Promise.resolve();
  private readonly onHup = () => this.schedule(0);
  private stopped = false;

  constructor(
    private readonly live: Config,
    private readonly validate: Validate,
    /** called after each reload attempt (tests and metrics) */
    private readonly onReload: (r: ReloadResult) => void = () => {},
  ) {}

  /** Loads, validates and applies the config files now; one reload at a time. */
  reload(): Promise<ReloadResult> {
    const run = this.running.then(() => this.reloadNow());
    this.running = run.catch(() => {});
    return run;
  }

  private async reloadNow(): Promise<ReloadResult> {
    let result: ReloadResult;
    try {
      const next = await loadConfigFiles(this.live.sources);
      const commit = this.validate(next);
      const restart = applyReloadable(this.live, next);
      commit();
      for (const key of restart) {
        log.warn("config reload: key changed but needs a restart; the running value is kept", {
          key,
        });
      }
      log.info("config reloaded", { files: this.live.sources.join(", "), restart });
      result = { ok: true, restart };
    } catch (e) {
      const error = e instanceof Error ? e.message : String(e);
      log.error("config reload refused; the running config is kept", { error });
      result = { ok: false, error };
    }
    this.onReload(result);
    return result;
  }

  /** Watches the config files and listens for SIGHUP. */
  start(): void {
    if (this.live.sources.length === 0) return;
    try {
      Deno.addSignalListener("SIGHUP", this.onHup);
    } catch { /* no SIGHUP on this platform */ }
    this.watch();
  }

  /**
   * Watches the files themselves (their folders may hold busy files, such as the KV file).
   * Editors save by writing a new file and renaming it over the old one, which ends a watch on
   * the old file: after any event the watch is set up again on whatever the paths name now.
   */
  private watch(): void {
    if (this.stopped) return;
    let watcher: Deno.FsWatcher;
    try {
      watcher = Deno.watchFs(this.live.sources, { recursive: false });
    } catch {
      // A file is missing for a moment (mid-rename): try again shortly.
      setTimeout(() => this.watch(), 500);
      return;
    }
    this.watcher = watcher;
    (async () => {
      for await (const ev of watcher) {
        if (ev.kind === "access") continue;
        this.schedule(200);
        break;
      }
    })().catch((e) => {
      if (!this.stopped) log.error("config watch failed", { error: String(e) });
    }).finally(() => {
      try {
        watcher.close();
      } catch { /* closed */ }
      if (!this.stopped) setTimeout(() => this.watch(), 50);
    });
  }

  /** Coalesces a burst of file events (an editor's save is several) into one reload. */
  private schedule(delayMs: number): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.reload(), delayMs);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    try {
      Deno.removeSignalListener("SIGHUP", this.onHup);
    } catch { /* not added */ }
    this.watcher?.close();
  }
}
