// The sending side of replication (SPEC Manifests rule 8, Blob upload rule 6): runs the
// `replication` jobs that writes enqueue (write_effects.ts).
//
// A push job re-reads the current state when it runs (a tag moved since: the current digest is
// pushed; a tag deleted since: nothing is), then pushes in dependency order: an index's children
// first, then blobs (HEAD first and skip present ones; a cross-repository mount from a name this
// process uploaded the blob to; else a streamed upload), then its signatures — its cosign `.sig`
// tag and its referrers (issue 34: a downstream that verifies finds them when the image lands,
// so a signed image is never held or shown unsigned there) — then the manifest (by tag with
// X-Svc-Source-Timestamp = the local tag's creation time). An image held here is not sent. A delete job
// sends DELETE with the delete event's time, by digest where the downstream deletes by digest
// only (deletes.ts). 409 REPLICATION_SUPERSEDED counts as done; a delete the downstream cannot
// apply is an outcome of its own, not retried; 401/403 dead-letter at once; everything else is
// retried with backoff. Every run's outcome is recorded per downstream in KV (state.ts).
import type { Config, DownstreamConfig } from "../config/mod.ts";
import { repositoryOf } from "../config/mod.ts";
import {
  formatSourceTimestamp,
  type ParsedManifest,
  parseManifest,
  RegistryError,
} from "../oci/mod.ts";
import type { BlobMeta, DigestHolds, ManifestMeta } from "../metadata/mod.ts";
import type { BlobStore } from "../storage/mod.ts";
import { Scavenger } from "../streams/mod.ts";
import { type JobContext, type JobQueues, PermanentJobError } from "../jobs/mod.ts";
import { isUpstreamError } from "../upstream/mod.ts";
import { REPLICATION_KINDS, type ReplicationPayload } from "./jobs.ts";
import type { Registry } from "../registry/mod.ts";
import { DownstreamClient, type WriteOutcome } from "./client.ts";
import { downstreamName } from "./paths.ts";
import { DownstreamDeletes } from "./deletes.ts";
import type { DownstreamState } from "./state.ts";
import { type DownstreamStatus, replicationStatus } from "./status.ts";
import { reconcile, type ReconcileOptions, type ReconcileSummary } from "./reconcile.ts";

export type ReplicationOutcome =
  | "pushed"
  | "deleted"
  | "superseded"
  | "skipped"
  | "tag-delete-unsupported"
  | "delete-unsupported"
  | "failed";

export interface ReplicationEvents {
  /** one finished job run per downstream; `failed` includes runs that will be retried */
  outcome?(downstream: string, outcome: ReplicationOutcome): void;
  /** bytes sent to a downstream in blob uploads */
  bytes?(downstream: string, n: number): void;
  /** where the status view's figures are read from (metrics read them at scrape time) */
  statusFrom?(read: () => Promise<DownstreamStatus[]>): void;
}

/** Referrers of referrers (a signature of an SBOM) are followed this deep. */
const REFERRER_DEPTH = 2;
/** Remembered blob locations per downstream (for mounts): bounded, oldest dropped. */
const MOUNT_HINTS_MAX = 10_000;

/** What the replicator works with, handed in by the composition root (lib/services). */
export interface ReplicatorDeps {
  cfg: Config;
  /** what it records of each downstream (state.ts): its own records */
  state: DownstreamState;
  /** the revisions and tags it sends; reconcile's namespaces and tag lists */
  meta: Pick<ManifestMeta, "revision" | "tag" | "catalog" | "listTags">;
  /** blob links: a blob is uploaded only from a namespace that owns it */
  blobs: Pick<BlobMeta, "link">;
  /** what still needs a digest that a tag delete would drop on a digest-only downstream */
  holds: Pick<DigestHolds, "tag" | "index">;
  /** the blobs it uploads */
  store: BlobStore;
  /** the `replication` queue: its handlers, and the status view's pending and failed jobs */
  jobs: JobQueues;
  /** manifest bodies, byte-exact */
  manifests: Pick<Registry["manifests"], "body">;
  /** the referrers pushed before their subject */
  listings: Pick<Registry["listings"], "referrers">;
  /** held images are not sent (issue 34): a signed image never appears unsigned anywhere */
  signatures?: Pick<Registry["signatures"], "isHeld">;
}

interface Local {
  digest: string;
  mediaType: string;
  bytes: Uint8Array;
  parsed: ParsedManifest;
}

export class Replicator {
  private clients = new Map<string, { cfg: DownstreamConfig; client: DownstreamClient }>();
  private readonly meta: ReplicatorDeps["meta"];
  private readonly blobs: ReplicatorDeps["blobs"];
  private readonly store: BlobStore;
  /** downstream → digest → a downstream name holding it */
  private readonly mountHints = new Map<string, Map<string, string>>();
  private readonly state: DownstreamState;
  private readonly deletes: DownstreamDeletes;
  private readonly cfg: Config;
  private readonly jobs: ReplicatorDeps["jobs"];
  private readonly manifests: ReplicatorDeps["manifests"];
  private readonly listings: ReplicatorDeps["listings"];
  private readonly signatures: ReplicatorDeps["signatures"];

  constructor(deps: ReplicatorDeps, private readonly events: ReplicationEvents = {}) {
    const { cfg } = deps;
    this.cfg = cfg;
    this.jobs = deps.jobs;
    this.manifests = deps.manifests;
    this.listings = deps.listings;
    this.signatures = deps.signatures;
    this.meta = deps.meta;
    this.blobs = deps.blobs;
    this.store = deps.store;
    this.state = deps.state;
    this.deletes = new DownstreamDeletes(deps.meta, deps.holds, this.state);
    events.statusFrom?.(async () =>
      (await replicationStatus(cfg, this.state, deps.jobs)).downstreams
    );
    for (const rc of cfg.repositories.values()) {
      for (const d of rc.downstreams ?? []) {
        this.clients.set(d.name, { cfg: d, client: new DownstreamClient(d) });
      }
    }
  }

  close(): void {
    for (const { client } of this.clients.values()) client.close();
  }

  /**
   * A config reload: builds `next`'s downstream clients now (throws on a bad ca_bundle, refusing
   * the reload) and returns the switch to them; old clients close a minute later.
   */
  prepareReload(next: Config): () => void {
    const clients = new Map<string, { cfg: DownstreamConfig; client: DownstreamClient }>();
    for (const rc of next.repositories.values()) {
      for (const d of rc.downstreams ?? []) {
        clients.set(d.name, { cfg: d, client: new DownstreamClient(d) });
      }
    }
    return () => {
      const old = this.clients;
      this.clients = clients;
      const t = setTimeout(() => {
        for (const { client } of old.values()) client.close();
      }, 60_000);
      Deno.unrefTimer(t as unknown as number);
    };
  }

  downstream(name: string): { cfg: DownstreamConfig; client: DownstreamClient } | undefined {
    return this.clients.get(name);
  }

  /**
   * One reconcile pass (reconcile.ts: `main.ts replicate`, the server's schedule) over `cfg`'s
   * downstreams, with this replicator's clients and readers.
   */
  reconcile(cfg: Config, opts: ReconcileOptions = {}): Promise<ReconcileSummary> {
    return reconcile(
      cfg,
      { meta: this.meta, jobs: this.jobs, downstream: (name) => this.downstream(name) },
      opts,
    );
  }

  /** Registers the four job kinds on the `replication` queue. */
  register(): void {
    for (const kind of Object.values(REPLICATION_KINDS)) {
      this.jobs.handle("replication", kind, (job) => this.run(job));
    }
  }

  async run(job: JobContext): Promise<void> {
    const p = parsePayload(job.kind, job.payload);
    const d = this.clients.get(p.downstream);
    if (!d) throw new PermanentJobError(`unknown downstream ${p.downstream} (not configured)`);
    const repo = repositoryOf(this.cfg, p.namespace);
    const name = downstreamName(repo.name, p.namespace, d.cfg.url);
    let outcome: ReplicationOutcome = "failed";
    let error: string | null = null;
    try {
      const r = await this.dispatch(job, p, d, name);
      outcome = r.outcome;
      if (r.detail !== undefined) error = r.detail;
    } catch (e) {
      error = e instanceof Error ? e.message : String(e);
      if (isUpstreamError(e) && e.kind === "denied") throw new PermanentJobError(e.message);
      if (e instanceof RegistryError && e.code === "MANIFEST_INVALID") {
        error = `local manifest unreadable: ${e.detail}`;
        throw new PermanentJobError(error);
      }
      throw e;
    } finally {
      this.events.outcome?.(d.cfg.name, outcome);
      // The figures are for the status view: losing one to a KV hiccup must not fail the job.
      await this.state.record(d.cfg.name, outcome, error).catch(() => {});
    }
  }

  private async dispatch(
    job: JobContext,
    p: ReplicationPayload,
    d: { cfg: DownstreamConfig; client: DownstreamClient },
    name: string,
  ): Promise<{ outcome: ReplicationOutcome; detail?: string }> {
    const c = d.client;
    switch (job.kind) {
      case REPLICATION_KINDS.pushTag: {
        const tag = await this.meta.tag(p.namespace, p.tag!);
        // deleted since: the delete's own job tells the downstream
        if (!tag) return { outcome: "skipped" };
        const local = await this.local(p.namespace, tag.digest);
        if (!local) return { outcome: "skipped" };
        // Held (its signature no longer verifies): its release queues the job again.
        if (await this.held(p.namespace, local.digest)) return { outcome: "skipped" };
        await this.pushTree(d, p.namespace, name, local, job.signal);
        await this.pushSignatures(d, p.namespace, name, local.digest, job.signal);
        const at = tag.createdAt === undefined ? null : formatSourceTimestamp(tag.createdAt);
        const r = await c.putManifest(name, p.tag!, local.bytes, local.mediaType, at);
        return { outcome: written(r) };
      }
      case REPLICATION_KINDS.pushDigest: {
        const local = await this.local(p.namespace, p.digest!);
        if (!local) return { outcome: "skipped" };
        if (await this.held(p.namespace, local.digest)) return { outcome: "skipped" };
        await this.pushManifestByDigest(d, p.namespace, name, local, job.signal);
        return { outcome: "pushed" };
      }
      case REPLICATION_KINDS.deleteTag:
        return await this.deletes.deleteTag({ ...d, name }, p.namespace, p.tag!, p.at!);
      case REPLICATION_KINDS.deleteDigest:
        return await this.deletes.deleteDigest({ ...d, name }, p.digest!, p.at!);
      default:
        throw new PermanentJobError(`unknown replication job kind ${job.kind}`);
    }
  }

  private async held(ns: string, digest: string): Promise<boolean> {
    return (await this.signatures?.isHeld(ns, digest)) ?? false;
  }

  /**
   * What signs `digest`, sent before it: its cosign `.sig` tag (by tag, with its blobs) and its
   * referrers (signatures, attestations, SBOMs; a referrer may land before its subject).
   */
  private async pushSignatures(
    d: { cfg: DownstreamConfig; client: DownstreamClient },
    ns: string,
    name: string,
    digest: string,
    signal: AbortSignal,
  ): Promise<void> {
    const m = /^sha256:([0-9a-f]{64})$/.exec(digest);
    const sigTag = m ? `sha256-${m[1]}.sig` : null;
    const tag = sigTag ? await this.meta.tag(ns, sigTag) : null;
    const sig = tag ? await this.local(ns, tag.digest) : null;
    if (sig) {
      await this.pushTree(d, ns, name, sig, signal);
      const at = tag!.createdAt === undefined ? null : formatSourceTimestamp(tag!.createdAt);
      await d.client.putManifest(name, sigTag!, sig.bytes, sig.mediaType, at);
    }
    await this.pushReferrers(d, ns, name, digest, signal, 0);
  }

  private async local(ns: string, digest: string): Promise<Local | null> {
    const rev = await this.meta.revision(ns, digest);
    if (!rev) return null;
    const bytes = await this.manifests.body(digest, rev);
    return { digest, mediaType: rev.mediaType, bytes, parsed: parseManifest(bytes, rev.mediaType) };
  }

  /** Children (for an index) and blobs, so the manifest PUT finds everything it references. */
  private async pushTree(
    d: { cfg: DownstreamConfig; client: DownstreamClient },
    ns: string,
    name: string,
    m: Local,
    signal: AbortSignal,
  ): Promise<void> {
    for (const child of m.parsed.children) {
      signal.throwIfAborted();
      const local = await this.local(ns, child.digest);
      // A child the namespace never received cannot be sent; the downstream decides.
      if (local) await this.pushManifestByDigest(d, ns, name, local, signal);
    }
    await this.pushBlobs(d, ns, name, m.parsed.blobs, signal);
  }

  private async pushManifestByDigest(
    d: { cfg: DownstreamConfig; client: DownstreamClient },
    ns: string,
    name: string,
    m: Local,
    signal: AbortSignal,
  ): Promise<void> {
    if (await d.client.manifestDigest(name, m.digest) === m.digest) return;
    await this.pushTree(d, ns, name, m, signal);
    // A referrer has no signatures of its own to send first (REFERRER_DEPTH bounds the walk).
    if (!m.parsed.subject) await this.pushSignatures(d, ns, name, m.digest, signal);
    await d.client.putManifest(name, m.digest, m.bytes, m.mediaType, null);
  }

  private async pushReferrers(
    d: { cfg: DownstreamConfig; client: DownstreamClient },
    ns: string,
    name: string,
    subject: string,
    signal: AbortSignal,
    depth: number,
  ): Promise<void> {
    if (depth >= REFERRER_DEPTH) return;
    let last: string | null = null;
    for (;;) {
      const page = await this.listings.referrers(ns, subject, null, last);
      for (const r of page.manifests) {
        signal.throwIfAborted();
        const local = await this.local(ns, r.digest);
        if (!local) continue;
        await this.pushManifestByDigest(d, ns, name, local, signal);
        await this.pushReferrers(d, ns, name, r.digest, signal, depth + 1);
      }
      if (!page.next) return;
      last = page.next;
    }
  }

  /** At most max_concurrent_transfers blobs at once, each HEADed, mounted or streamed. */
  private async pushBlobs(
    d: { cfg: DownstreamConfig; client: DownstreamClient },
    ns: string,
    name: string,
    digests: string[],
    signal: AbortSignal,
  ): Promise<void> {
    const queue = [...new Set(digests)];
    const worker = async () => {
      for (let digest = queue.shift(); digest !== undefined; digest = queue.shift()) {
        signal.throwIfAborted();
        await this.pushBlob(d, ns, name, digest);
      }
    };
    await Promise.all(
      Array.from({ length: Math.min(d.cfg.maxConcurrentTransfers, queue.length) }, worker),
    );
  }

  private async pushBlob(
    d: { cfg: DownstreamConfig; client: DownstreamClient },
    ns: string,
    name: string,
    digest: string,
  ): Promise<void> {
    const c = d.client;
    if (await c.hasBlob(name, digest)) return;
    // Not readable here (a manifest pushed with references it does not own): the downstream
    // gets the manifest and decides, as a client push would.
    const link = await this.blobs.link(ns, digest);
    if (!link) return;
    const hints = this.hintsOf(d.cfg.name);
    const from = hints.get(digest);
    const started = await c.mountOrStart(name, digest, from && from !== name ? from : null);
    if (started !== "mounted") {
      let sent = 0;
      // The store's concurrent readers hand out a fresh buffer per chunk: scavenge as they pass.
      const scavenger = new Scavenger();
      const counted = (await this.store.read(digest)).pipeThrough(
        new TransformStream<Uint8Array, Uint8Array>({
          transform: (chunk, ctl) => {
            sent += chunk.byteLength;
            scavenger.passed(chunk.byteLength);
            ctl.enqueue(chunk);
          },
        }),
      );
      try {
        await c.upload(name, started, digest, link.size, counted);
      } finally {
        this.events.bytes?.(d.cfg.name, sent);
      }
    }
    hints.delete(digest);
    hints.set(digest, name);
    if (hints.size > MOUNT_HINTS_MAX) hints.delete(hints.keys().next().value!);
  }

  private hintsOf(downstream: string): Map<string, string> {
    let m = this.mountHints.get(downstream);
    if (!m) this.mountHints.set(downstream, m = new Map());
    return m;
  }
}

function written(r: WriteOutcome): ReplicationOutcome {
  return r === "superseded" ? "superseded" : "pushed";
}

function parsePayload(kind: string, v: unknown): ReplicationPayload {
  const p = (v && typeof v === "object" ? v : {}) as Record<string, unknown>;
  const str = (k: string) => typeof p[k] === "string" && (p[k] as string).length > 0;
  const ok = str("downstream") && str("namespace") &&
    (kind === REPLICATION_KINDS.pushTag || kind === REPLICATION_KINDS.deleteTag
      ? str("tag")
      : str("digest")) &&
    (kind.startsWith("delete") ? typeof p.at === "number" && Number.isFinite(p.at) : true);
  if (!ok) throw new PermanentJobError(`malformed ${kind} payload`);
  return p as unknown as ReplicationPayload;
}
