// The content a sync fetches for one manifest, through the pull-through cache's machinery:
// the manifest verified and stored byte-exact (Manifests.storeFetched), an index's children of
// the chosen platforms, its blobs filled once each (PullThrough.ensureBlob, with its `cache`
// job as insurance when the run is a job), and its referrers. A manifest is stored (and tagged)
// only after all of that is in: a run cut short never leaves a tag whose content is missing.
import type { Config, RepositoryConfig, SyncConfig } from "../config/mod.ts";
import { type ParsedManifest, parseManifest, RegistryError } from "../oci/mod.ts";
import type { SyncDeps } from "./deps.ts";
import type { FetchedManifest, UpstreamSet } from "../upstream/mod.ts";
import { type RateGate, RateLimited } from "./rate_gate.ts";
import { matchesPlatform } from "./select.ts";

/** Blobs of one image filled at the same time. */
const BLOB_CONCURRENCY = 4;

export interface ContentHooks {
  /** a blob was filled: its declared size */
  blobFetched(bytes: number): void;
  /** an error that does not fail the tag (a referrer left out) */
  error(message: string): void;
}

/** A manifest body, typed by its own mediaType or else by the upstream's Content-Type. */
function parse(bytes: Uint8Array, contentType: string): ParsedManifest {
  try {
    return parseManifest(bytes, null);
  } catch {
    return parseManifest(bytes, contentType);
  }
}

export class ContentFetcher {
  private readonly inflight = new Map<string, Promise<void>>();
  private readonly links: SyncDeps["links"];
  private readonly registry: SyncDeps["registry"];

  constructor(
    private readonly cfg: Config,
    deps: SyncDeps,
    private readonly rc: RepositoryConfig,
    private readonly sync: SyncConfig,
    private readonly up: UpstreamSet,
    private readonly gate: RateGate,
    private readonly opts: { signal: AbortSignal; insureFills: boolean },
    private readonly hooks: ContentHooks,
  ) {
    this.registry = deps.registry;
    this.links = deps.links;
  }

  /** The digest `reference` resolves to here, or null. */
  async localDigest(ns: string, reference: string): Promise<string | null> {
    try {
      return (await this.registry.manifests.resolve(ns, reference)).digest;
    } catch (e) {
      if (e instanceof RegistryError && e.code === "MANIFEST_UNKNOWN") return null;
      throw e;
    }
  }

  /**
   * `digest` with what it needs (chosen platforms' children, blobs, referrers), stored and
   * then tagged `tag` when given. `depth` bounds indexes of indexes.
   */
  async fetchManifest(
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
    await this.blobs(ns, parsed.blobs, parsed.blobSizes);
    if (this.sync.includeReferrers && depth < 2) await this.referrers(ns, m.digest, depth);
    // A repository with [verify] (issue 34): the upstream's signatures come first, and the
    // image is judged before anyone is served it (never unsigned anywhere).
    const verify = this.registry.signatures.policyOf(ns) !== null;
    if (verify) {
      await this.gate.call(() => this.registry.pullThrough.fetchSignatures(this.rc, ns, m.digest));
    }
    await this.registry.manifests.storeFetched(ns, m.digest, m.bytes, m.mediaType, tag);
    if (verify) await this.registry.signatures.reconsider(ns, m.digest, 0, false);
  }

  /** Whether `digest` is here with what a sync fetches for it (chosen children, blobs). */
  async complete(ns: string, digest: string, depth: number): Promise<boolean> {
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

  private async blobs(
    ns: string,
    digests: string[],
    sizes?: ReadonlyMap<string, number>,
  ): Promise<void> {
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
        if (fetched) this.hooks.blobFetched(sizes?.get(d!) ?? 0);
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
      this.hooks.error(`${ns}@${subject}: referrers left out: ${(e as Error).message}`);
      return;
    }
    for (const r of found) await this.fetchOnce(ns, r.digest, depth + 1);
  }
}
