// Which upstreams serve a namespace: the clients of every pull-through repository's upstreams
// (built at startup and on a config reload), the repository governing a namespace, and how an
// upstream's failure reads to the client. What the cache's other parts share.
import { RegistryError, unavailable, upstreamFailed } from "../oci/mod.ts";
import { type Config, type RepositoryConfig, repositoryOf } from "../config/mod.ts";
import { type BlobMeta, type UpstreamChecks } from "../metadata/mod.ts";
import { type JobQueues } from "../jobs/mod.ts";
import {
  isUpstreamError,
  type ObserveFn,
  type UpstreamError,
  UpstreamSet,
} from "../upstream/mod.ts";
import { FillError, type Fills } from "./blob_fill.ts";
import type { CacheCap } from "./cache_cap.ts";
import type { CacheManifests, SignatureSources } from "./ports.ts";

export type PullThroughResult =
  | "hit"
  | "miss"
  | "revalidated"
  | "refreshed"
  | "stale"
  | "linked"
  | "follow"
  | "range"
  /** a blob filled ahead of the client (prefetch.ts) */
  | "prefetch"
  /** a cached manifest whose stored body failed its digest, fetched again */
  | "refetched"
  /** a blob passed through uncached: the blob store took no new bytes (full, failing) */
  | "uncached"
  | "error";

export interface PullThroughDeps {
  cfg: Config;
  blobs: BlobMeta;
  manifests: CacheManifests;
  /**
   * Whether `e`, thrown by `manifests.body`, says the stored body is gone or rotten (the read
   * quarantined it): the cache then fetches the manifest again instead of failing the pull.
   */
  bodyUnavailable: (e: unknown) => boolean;
  /** which signatures of an image are fetched with it (issue 34) */
  signatureSources: SignatureSources;
  checks: UpstreamChecks;
  fills: Fills;
  jobs: JobQueues;
  /** `max_cache_bytes`: eviction before fills, and the images it must not evict */
  cacheCap?: CacheCap;
  /**
   * Why the blob store takes no new bytes now (below its free-space reserve, full, failing), or
   * null: a miss is then passed through uncached instead of filled.
   */
  blobRefusal?: () => Promise<string | null>;
  observeUpstream?: ObserveFn;
  observe?: (kind: "manifest" | "blob", result: PullThroughResult) => void;
}

/** The upstream clients of each pull-through repository, swapped whole on a reload. */
export class PullUpstreams {
  private sets = new Map<string, UpstreamSet>();

  /** Builds the upstream clients now, so a bad ca_bundle fails at startup. */
  constructor(private readonly d: PullThroughDeps) {
    this.sets = this.build(d.cfg);
  }

  private build(cfg: Config): Map<string, UpstreamSet> {
    const sets = new Map<string, UpstreamSet>();
    for (const rc of cfg.repositories.values()) {
      if (rc.upstreams?.length) {
        sets.set(
          rc.name,
          new UpstreamSet(rc.name, rc.upstreams, { observe: this.d.observeUpstream }),
        );
      }
    }
    return sets;
  }

  /**
   * A config reload: builds the clients of `next`'s upstreams now (throws on a bad ca_bundle,
   * refusing the reload) and returns the switch to them. Old clients are closed a minute later,
   * when requests still using them are long done.
   */
  prepareReload(next: Config): () => void {
    const sets = this.build(next);
    return () => {
      const old = this.sets;
      this.sets = sets;
      const t = setTimeout(() => {
        for (const s of old.values()) s.close();
      }, 60_000);
      Deno.unrefTimer(t as unknown as number);
    };
  }

  close(): void {
    for (const s of this.sets.values()) s.close();
  }

  /** The pull-through repository governing `ns`, or null for a hosted namespace. */
  repository(ns: string): RepositoryConfig | null {
    const rc = repositoryOf(this.d.cfg, ns);
    return this.sets.has(rc.name) ? rc : null;
  }

  /** Client writes to a pull-through repository are refused: it mirrors its upstreams. */
  assertWritable(ns: string): void {
    const rc = this.repository(ns);
    if (!rc) return;
    throw new RegistryError(
      "DENIED",
      `repository ${rc.name} is a read-only pull-through cache of ${
        rc.upstreams!.map((u) => u.url).join(", ")
      }`,
    );
  }

  set(rc: RepositoryConfig): UpstreamSet {
    return this.sets.get(rc.name)!;
  }
}

export function upstreamMessage(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

/**
 * An upstream failure as the client sees it: missing upstream → the caller's 404; down → 503
 * PROVIDER_UNAVAILABLE with Retry-After; an upstream's 416 to a forwarded range → 416; a
 * refusal or a bad answer (wrong digest, malformed) → 502 PROVIDER_UNAVAILABLE naming it.
 */
export function clientError(e: unknown, notFound: () => RegistryError): unknown {
  if (e instanceof FillError) {
    return upstreamFailed(e.message);
  }
  if (!isUpstreamError(e)) return e;
  const u = e as UpstreamError;
  if (u.kind === "not-found") return notFound();
  if (u.status === 416) {
    return new RegistryError("SIZE_INVALID", `upstream: range not satisfiable (${u.message})`);
  }
  return u.down ? unavailable(u.message, u.retryAfterSecs ?? 5) : upstreamFailed(u.message);
}
