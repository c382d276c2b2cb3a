// One run of a `[[repository."<name>".sync]]` entry: for each namespace, list the upstream's
// tags, pick the matching ones, and fetch those that are new or moved through the pull-through
// cache's own machinery (manifests verified and stored byte-exact by Manifests.storeFetched,
// blobs filled once each by PullThrough.ensureBlob with its `cache` job as insurance). A tag is
// pointed at its manifest last, after its children and blobs are in: a run cut short never
// leaves a tag whose content is missing. With `prune`, matching local tags the upstream no
// longer lists are deleted, only after a complete and valid listing.
import type { Config, RepositoryConfig, SyncConfig } from "../config/mod.ts";
import { BlobMeta, type SyncRunRecord } from "../metadata/mod.ts";
import { type ParsedManifest, parseManifest, type Platform, RegistryError } from "../oci/mod.ts";
import type { Registry } from "../registry/mod.ts";
import { type FetchedManifest, upstreamName, UpstreamSet } from "../upstream/mod.ts";
import { RateGate, RateLimited } from "./rate_gate.ts";
import type { SyncState } from "./state.ts";
import { UpstreamTags } from "./upstream_tags.ts";

export interface RunOptions {
  dryRun: boolean;
  signal: AbortSignal;
  /** queue the `cache` job that redoes a blob fill should this process die (job runs) */
  insureFills: boolean;
  /** one line per action (the CLI prints them) */
  report?: (line: string) => void;
}

/** Tags fetched at the same time within a run. */
const TAG_CONCURRENCY = 4;
/** Blobs of one image filled at the same time. */
const BLOB_CONCURRENCY = 4;
const MAX_ERRORS = 50;

/** The local namespace of upstream namespace `upstream` (as the first upstream names it). */
export function localNamespace(rc: RepositoryConfig, upstream: string): string | null {
  const url = rc.upstreams![0].url;
  const prefix = new URL(url).pathname.replace(/^\/+|\/+$/g, "");
  let rest = upstream;
  if (prefix !== "") {
    if (!upstream.startsWith(prefix + "/")) return null;
    rest = upstream.slice(prefix.length + 1);
  }
  // Docker Hub's `library/x` is what clients pull as `x`: warm the name they will ask for.
  const short = rest.startsWith("library/") ? `${rc.name}/${rest.slice(8)}` : null;
  if (short && upstreamName(rc.name, short, url) === upstream) return short;
  const ns = `${rc.name}/${rest}`;
  return upstreamName(rc.name, ns, url) === upstream ? ns : null;
}

export function matchesPlatform(p: Platform | undefined, wanted: string[] | null): boolean {
  if (wanted === null) return true;
  if (!p) return false;
  return wanted.some((w) => {
    const [os, arch, variant] = w.split("/");
    return os === p.os && arch === p.architecture &&
      (variant === undefined || variant === p.variant);
  });
}

export function matchesTag(sync: SyncConfig, tag: string): boolean {
  return sync.tags.length === 0 || sync.tags.some((re) => re.test(tag));
}

/** A manifest body, typed by its own mediaType or else by the upstream's Content-Type. */
function parse(bytes: Uint8Array, contentType: string): ParsedManifest {
  try {
    return parseManifest(bytes, null);
  } catch {
    return parseManifest(bytes, contentType);
  }
}

export class SyncRun {
  private readonly up: UpstreamSet;
  private readonly gate: RateGate;
  private readonly record: SyncRunRecord;
  private readonly inflight = new Map<string, Promise<void>>();
  private readonly links: BlobMeta;
  /** tag fetches under way (counted against max_tags_per_run before they finish) */
  private fetching = 0;
  /** a tag was left for the next run: max_tags_per_run was reached */
  private deferred = false;

  constructor(
    private readonly cfg: Config,
    private readonly registry: Registry,
    private readonly state: SyncState,
    private readonly rc: RepositoryConfig,
    private readonly n: number,
    private readonly sync: SyncConfig,
    resume: SyncRunRecord | null,
    private readonly opts: RunOptions,
  ) {
    this.up = new UpstreamSet(rc.name, rc.upstreams!);
    this.gate = new RateGate(opts.signal);
    this.links = new BlobMeta(registry.kv);
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
    if (!this.opts.dryRun) await this.state.finish(this.rc.name, this.n, this.record);
    return this.record;
  }

  /** The record of a run that ended on an unexpected error. */
  fail(e: unknown): SyncRunRecord {
    this.up.close();
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
    if (listed === null) return true;
    const cursor = this.record.cursor;
    const resumeAfter = cursor?.namespace === upstreamNs ? cursor.tag : null;
    const selected = listed.filter((t) => matchesTag(this.sync, t)).sort()
      .filter((t) => resumeAfter === null || t > resumeAfter);
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
      if (!this.opts.dryRun) await this.state.save(this.rc.name, this.n, this.record);
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
    for (const u of this.rc.upstreams!) {
      const name = upstreamName(this.rc.name, ns, u.url);
      if (name === null) continue;
      const client = new UpstreamTags(u);
      try {
        const listing = await this.gate.call(() => client.list(name));
        this.gate.learn(listing.rateLimit);
        return listing.tags;
      } catch (e) {
        if (e instanceof RateLimited) throw e;
        failures.push(e instanceof Error ? e.message : String(e));
      } finally {
        client.close();
      }
    }
    this.error(`${upstreamNs}: tag list unusable, nothing changed: ${failures.join("; ")}`);
    return null;
  }

  /** One tag: nothing when its upstream digest is the local one, else fetch it whole. */
  private async tag(ns: string, tag: string): Promise<void> {
    try {
      const head = await this.gate.call(() => this.up.headManifest(ns, tag, null));
      const local = await this.localDigest(ns, tag);
      // Unchanged and complete; a tag a client only inspected may lack its blobs.
      const same = local === head.digest;
      if (same && await this.complete(ns, head.digest, 0)) {
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
        await this.fetchManifest(ns, head.digest, tag, 0);
      } finally {
        this.fetching--;
      }
      this.record.tags_fetched++;
      this.opts.report?.(`fetched ${ns}:${tag} (${verb}) = ${head.digest}`);
    } catch (e) {
      if (e instanceof RateLimited || this.opts.signal.aborted) throw e;
      this.error(`${ns}:${tag}: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  private async localDigest(ns: string, tag: string): Promise<string | null> {
    try {
      return (await this.registry.manifests.resolve(ns, tag)).digest;
    } catch (e) {
      if (e instanceof RegistryError && e.code === "MANIFEST_UNKNOWN") return null;
      throw e;
    }
  }

  /**
   * `digest` with what it needs (chosen platforms' children, blobs, referrers), stored and
   * then tagged `tag` when given. `depth` bounds indexes of indexes.
   */
  private async fetchManifest(
    ns: string,
    digest: string,
    tag: string | null,
    depth: number,
  ): Promise<void> {
    this.gate.spend();
    const m: FetchedManifest = await this.gate.call(() =>
      this.up.getManifest(ns, digest, null, this.cfg.global.maxManifestSize)
    );
    const parsed = parse(m.bytes, m.mediaType);
    if (parsed.children.length > 0 && depth < 2) {
      for (const c of parsed.children) {
        if (!matchesPlatform(c.platform, this.sync.platforms)) continue;
        await this.fetchOnce(ns, c.digest, depth + 1);
      }
    }
    await this.blobs(ns, parsed.blobs);
    if (this.sync.includeReferrers && depth < 2) await this.referrers(ns, m.digest, depth);
    await this.registry.manifests.storeFetched(ns, m.digest, m.bytes, m.mediaType, tag);
  }

  /** Whether `digest` is here with what a sync fetches for it (chosen children, blobs). */
  private async complete(ns: string, digest: string, depth: number): Promise<boolean> {
    let parsed: ParsedManifest;
    try {
      const local = await this.registry.manifests.resolve(ns, digest);
      const body = await this.registry.manifests.body(local.digest, local.rev);
      parsed = parse(body, local.rev.mediaType);
    } catch (e) {
      if (e instanceof RegistryError) return false; // unknown, or a body past parsing
      throw e;
    }
    if (depth < 2) {
      for (const c of parsed.children) {
        if (!matchesPlatform(c.platform, this.sync.platforms)) continue;
        if (!(await this.complete(ns, c.digest, depth + 1))) return false;
      }
    }
    for (const b of new Set(parsed.blobs)) {
      if (!(await this.links.link(ns, b))) return false;
    }
    return true;
  }

  /** A child or referrer several tags of a batch share is fetched once (single flight). */
  private fetchOnce(ns: string, digest: string, depth: number): Promise<void> {
    const key = `${ns}@${digest}`;
    let p = this.inflight.get(key);
    if (!p) {
      p = (async () => {
        if (await this.complete(ns, digest, depth)) return;
        await this.fetchManifest(ns, digest, null, depth);
      })();
      this.inflight.set(key, p);
      p.then(() => this.inflight.delete(key), () => this.inflight.delete(key));
    }
    return p;
  }

  private async blobs(ns: string, digests: string[]): Promise<void> {
    const todo = [...new Set(digests)];
    const worker = async () => {
      for (let d = todo.shift(); d !== undefined; d = todo.shift()) {
        const fetched = await this.gate.call(() =>
          this.registry.pullThrough.ensureBlob(
            this.rc,
            ns,
            d!,
            this.opts.signal,
            this.opts.insureFills,
          )
        );
        if (fetched) this.record.blobs_fetched++;
      }
    };
    await Promise.all(Array.from({ length: Math.min(BLOB_CONCURRENCY, todo.length) }, worker));
  }

  /** Referrers are extras: one the upstream cannot list or serve is reported, not fatal. */
  private async referrers(ns: string, subject: string, depth: number): Promise<void> {
    let found;
    try {
      found = await this.gate.call(() => this.up.getReferrers(ns, subject));
    } catch (e) {
      if (e instanceof RateLimited) throw e;
      this.error(`${ns}@${subject}: referrers left out: ${(e as Error).message}`);
      return;
    }
    for (const r of found) await this.fetchOnce(ns, r.digest, depth + 1);
  }

  /** Deletes local tags matching the entry that the (complete) upstream listing lacks. */
  private async prune(ns: string, upstream: Set<string>): Promise<void> {
    let local: string[];
    try {
      local = (await this.registry.listings.tags(ns, null, null)).tags;
    } catch (e) {
      if (e instanceof RegistryError && e.code === "NAME_UNKNOWN") return;
      throw e;
    }
    for (const tag of local) {
      if (upstream.has(tag) || !matchesTag(this.sync, tag)) continue;
      if (this.opts.dryRun) {
        this.opts.report?.(`would prune ${ns}:${tag} (gone upstream)`);
      } else {
        await this.registry.manifests.delete(ns, tag, null);
        this.opts.report?.(`pruned ${ns}:${tag} (gone upstream)`);
      }
      this.record.tags_pruned++;
    }
  }
}
