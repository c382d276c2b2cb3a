// One run of a `[[repository."<name>".sync]]` entry: for each namespace, list the upstream's
// tags, pick the matching ones, HEAD each and fetch those that are new, moved or incomplete
// (content.ts), 4 at a time, saving a cursor after each batch so a run cut short resumes. With
// `prune`, matching local tags the upstream no longer lists are deleted, only after a complete
// and valid listing.
import type { Config, RepositoryConfig, SyncConfig } from "../config/mod.ts";
import { RegistryError } from "../oci/mod.ts";
import type { SyncDeps } from "./deps.ts";
import type { SyncRunRecord } from "./state.ts";
import { upstreamName, UpstreamSet } from "../upstream/mod.ts";
import { ContentFetcher } from "./content.ts";
import { RateGate, RateLimited } from "./rate_gate.ts";
import { localNamespace, matchesTag } from "./select.ts";
import type { ProgressSink, RunTracker } from "../jobs/mod.ts";

export interface RunOptions {
  dryRun: boolean;
  signal: AbortSignal;
  /** queue the `cache` job that redoes a blob fill should this process die (job runs) */
  insureFills: boolean;
  /** one line per action (the CLI prints them) */
  report?: (line: string) => void;
  /** tags checked of those to check, and bytes fetched (the CLI's progress line) */
  progress?: ProgressSink;
  /** why it runs, as its progress record says ("schedule", "sync command") */
  cause?: string;
}

/** Tags fetched at the same time within a run. */
const TAG_CONCURRENCY = 4;
const MAX_ERRORS = 50;

export class SyncRun {
  private readonly up: UpstreamSet;
  private readonly gate: RateGate;
  private readonly record: SyncRunRecord;
  private readonly content: ContentFetcher;
  /** tag fetches under way (counted against max_tags_per_run before they finish) */
  private fetching = 0;
  /** a tag was left for the next run: max_tags_per_run was reached */
  private deferred = false;
  /** tags checked in this process (fetched, unchanged or failed) */
  private checked = 0;
  private failedTags = 0;
  /** tags to check in the namespaces listed so far */
  private toCheck = 0;
  private namespacesListed = 0;
  /** the record the Replication page reads (none for a dry run, which writes nothing) */
  private tracker: RunTracker | null = null;

  constructor(
    private readonly cfg: Config,
    private readonly deps: SyncDeps,
    private readonly rc: RepositoryConfig,
    private readonly n: number,
    private readonly sync: SyncConfig,
    resume: SyncRunRecord | null,
    private readonly opts: RunOptions,
  ) {
    this.up = new UpstreamSet(rc.name, rc.upstreams!);
    this.gate = new RateGate(opts.signal);
    this.content = new ContentFetcher(cfg, deps, rc, sync, this.up, this.gate, opts, {
      blobFetched: (bytes) => {
        this.record.blobs_fetched++;
        this.record.bytes_fetched = (this.record.bytes_fetched ?? 0) + bytes;
        this.progressed();
      },
      error: (msg) => this.error(msg),
    });
    const same = resume !== null && !resume.dry_run && !opts.dryRun &&
      JSON.stringify(resume.namespaces) === JSON.stringify(sync.namespaces);
    this.record = same ? { ...resume!, errors: [...resume!.errors] } : {
      id: crypto.randomUUID(),
      namespaces: sync.namespaces,
      started_at: Date.now(),
      finished_at: null,
      cursor: null,
      tags_fetched: 0,
      tags_unchanged: 0,
      tags_pruned: 0,
      blobs_fetched: 0,
      outcome: "ok",
      errors: [],
      dry_run: opts.dryRun,
      next_at: null,
    };
    if (same) opts.report?.(`resuming run ${resume!.id} after ${JSON.stringify(resume!.cursor)}`);
  }

  /** Runs to the end (or until rate-limited) and returns the finished record. */
  async run(): Promise<SyncRunRecord> {
    if (!this.opts.dryRun) {
      this.tracker = await this.deps.runs.start(
        "sync",
        `${this.rc.name}#${this.n} (${this.sync.namespaces.join(", ")})`,
        this.opts.cause ?? "schedule",
        { id: this.record.id, startedAt: this.record.started_at },
      );
    }
    try {
      return await this.runTracked();
    } finally {
      await this.tracker?.stop();
    }
  }

  private async runTracked(): Promise<SyncRunRecord> {
    let retryAfterSecs: number | undefined;
    try {
      for (const upstreamNs of this.sync.namespaces) {
        const cursor = this.record.cursor;
        if (
          cursor && upstreamNs !== cursor.namespace && this.before(upstreamNs, cursor.namespace)
        ) {
          continue;
        }
        const more = await this.namespace(upstreamNs);
        if (!more) break;
      }
    } catch (e) {
      if (!(e instanceof RateLimited)) throw e;
      this.error(e.message);
      this.record.outcome = "rate-limited";
      retryAfterSecs = e.retryAfterSecs;
    } finally {
      this.up.close();
    }
    this.record.finished_at = Date.now();
    this.record.next_at = this.record.finished_at +
      (retryAfterSecs ?? this.sync.intervalSecs) * 1000;
    if (this.record.outcome === "ok" && this.record.errors.length > 0) {
      this.record.outcome = this.record.tags_fetched + this.record.tags_unchanged > 0
        ? "partial"
        : "failed";
    }
    if (!this.opts.dryRun) await this.deps.state.finish(this.rc.name, this.n, this.record);
    await this.tracker?.finish({ ...this.figures(), outcome: this.record.outcome });
    return this.record;
  }

  /** What the progress line and record show: tags checked of those to check, bytes fetched. */
  private figures() {
    const r = this.record;
    return {
      done: this.checked - this.failedTags,
      failed: this.failedTags,
      // Known once every namespace of the entry was listed.
      total: this.namespacesListed === this.sync.namespaces.length ? this.toCheck : null,
      bytes: r.bytes_fetched ?? 0,
    };
  }

  private progressed(): void {
    const f = this.figures();
    this.tracker?.update(f);
    const r = this.record;
    this.opts.progress?.({
      unit: "tags",
      done: this.checked,
      total: f.total,
      bytes: f.bytes,
      note: `${r.tags_fetched} ${
        this.opts.dryRun ? "to fetch" : "fetched"
      }, ${r.tags_unchanged} unchanged, ${r.blobs_fetched} blob(s)${
        this.failedTags ? `, ${this.failedTags} failed` : ""
      }`,
    });
  }

  /** The record of a run that ended on an unexpected error. */
  fail(e: unknown): SyncRunRecord {
    this.up.close();
    this.tracker?.finish({ ...this.figures(), outcome: "failed" }).catch(() => {});
    this.error(`run failed: ${e instanceof Error ? e.message : String(e)}`);
    this.record.outcome = "failed";
    this.record.finished_at = Date.now();
    this.record.next_at = this.record.finished_at + this.sync.intervalSecs * 1000;
    return this.record;
  }

  /** Whether namespace `a` comes before `b` in the entry's order. */
  private before(a: string, b: string): boolean {
    return this.sync.namespaces.indexOf(a) < this.sync.namespaces.indexOf(b);
  }

  private error(msg: string): void {
    if (this.record.errors.length < MAX_ERRORS) this.record.errors.push(msg);
    this.opts.report?.(`error: ${msg}`);
  }

  /** One namespace; false when the run's tag budget is spent (stop the run). */
  private async namespace(upstreamNs: string): Promise<boolean> {
    const ns = localNamespace(this.rc, upstreamNs);
    if (ns === null) {
      this.error(`${upstreamNs}: not a namespace of ${this.rc.upstreams![0].url}`);
      return true;
    }
    const listed = await this.listTags(ns, upstreamNs);
    this.namespacesListed++;
    if (listed === null) {
      this.progressed();
      return true;
    }
    const cursor = this.record.cursor;
    const resumeAfter = cursor?.namespace === upstreamNs ? cursor.tag : null;
    const selected = listed.filter((t) => matchesTag(this.sync, t)).sort()
      .filter((t) => resumeAfter === null || t > resumeAfter);
    this.toCheck += selected.length;
    this.progressed();
    this.opts.report?.(
      `${upstreamNs}: ${listed.length} tag(s) upstream, ${selected.length} to check`,
    );
    for (let i = 0; i < selected.length && !this.deferred; i += TAG_CONCURRENCY) {
      this.opts.signal.throwIfAborted();
      const batch = selected.slice(i, i + TAG_CONCURRENCY);
      // Settled, not raced: nothing of this batch may still run once the run has ended.
      const done = await Promise.allSettled(batch.map((tag) => this.tag(ns, tag)));
      const failed = done.find((d) => d.status === "rejected");
      if (failed) throw (failed as PromiseRejectedResult).reason;
      this.record.cursor = { namespace: upstreamNs, tag: batch[batch.length - 1] };
      if (!this.opts.dryRun) await this.deps.state.save(this.rc.name, this.n, this.record);
    }
    if (this.deferred) {
      // The run ends here: the next one starts over (unchanged tags cost a HEAD each).
      this.opts.report?.(`max_tags_per_run (${this.sync.maxTagsPerRun}) reached`);
      return false;
    }
    if (this.sync.prune) await this.prune(ns, new Set(listed));
    return true;
  }

  /** The upstream's tags, from the first upstream that answers; null after an error. */
  private async listTags(ns: string, upstreamNs: string): Promise<string[] | null> {
    const failures: string[] = [];
    for (const [i, u] of this.rc.upstreams!.entries()) {
      const name = upstreamName(this.rc.name, ns, u.url);
      if (name === null) continue;
      try {
        const listing = await this.gate.call(() => this.up.clients[i].listTags(name));
        this.gate.learn(listing.rateLimit);
        return listing.tags;
      } catch (e) {
        if (e instanceof RateLimited) throw e;
        failures.push(e instanceof Error ? e.message : String(e));
      }
    }
    this.error(`${upstreamNs}: tag list unusable, nothing changed: ${failures.join("; ")}`);
    return null;
  }

  /** One tag: nothing when its upstream digest is the local one, else fetch it whole. */
  private async tag(ns: string, tag: string): Promise<void> {
    try {
      await this.tagOnce(ns, tag);
    } finally {
      this.checked++;
      this.progressed();
    }
  }

  private async tagOnce(ns: string, tag: string): Promise<void> {
    try {
      const head = await this.gate.call(() => this.up.headManifest(ns, tag, null));
      const local = await this.content.localDigest(ns, tag);
      // Unchanged and complete; a tag a client only inspected may lack its blobs.
      const same = local === head.digest;
      if (same && await this.content.complete(ns, head.digest, 0)) {
        this.record.tags_unchanged++;
        return;
      }
      const verb = same ? "incomplete" : local === null ? "new" : `moved from ${local}`;
      // Tags of a batch run at once: a fetch past max_tags_per_run waits for the next run.
      if (this.record.tags_fetched + this.fetching >= this.sync.maxTagsPerRun) {
        this.deferred = true;
        return;
      }
      if (this.opts.dryRun) {
        this.opts.report?.(`would fetch ${ns}:${tag} (${verb}) = ${head.digest}`);
        this.record.tags_fetched++;
        return;
      }
      this.fetching++;
      try {
        await this.content.fetchManifest(ns, head.digest, tag, 0);
      } finally {
        this.fetching--;
      }
      this.record.tags_fetched++;
      this.opts.report?.(`fetched ${ns}:${tag} (${verb}) = ${head.digest}`);
    } catch (e) {
      if (e instanceof RateLimited || this.opts.signal.aborted) throw e;
      this.failedTags++;
      this.error(`${ns}:${tag}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  /** Deletes local tags matching the entry that the (complete) upstream listing lacks. */
  private async prune(ns: string, upstream: Set<string>): Promise<void> {
    let local: string[];
    try {
      local = (await this.deps.registry.listings.tags(ns, null, null)).tags;
    } catch (e) {
      if (e instanceof RegistryError && e.code === "NAME_UNKNOWN") return;
      throw e;
    }
    for (const tag of local) {
      if (upstream.has(tag) || !matchesTag(this.sync, tag)) continue;
      if (this.opts.dryRun) {
        this.opts.report?.(`would prune ${ns}:${tag} (gone upstream)`);
      } else {
        await this.deps.registry.manifests.delete(ns, tag, null);
        this.opts.report?.(`pruned ${ns}:${tag} (gone upstream)`);
      }
      this.record.tags_pruned++;
    }
  }
}
