// The `/v2/_svc/` listings (SPEC §Extension endpoints): repositories, namespaces, revisions,
// uploads and the UI config. Visibility follows the catalog: a namespace shows only when the
// caller could list its tags (`admit`, the per-request policy check).
import { isValidName, RegistryError, truncate } from "../oci/mod.ts";
import { type Config, repositoryOf } from "../config/mod.ts";
import type { ManifestMeta, PullMeta, SvcMeta } from "../metadata/mod.ts";
import { mapBounded } from "./map_bounded.ts";
import { type Platform, RevisionFactsCache } from "./revision_facts.ts";

export type Admit = (ns: string) => boolean | Promise<boolean>;

/** Repository settings every summary carries. */
interface RepositorySettings {
  pull_through_cache: boolean;
  upstream_urls: string[];
  immutable_tags: boolean;
}

export interface RepositorySummary extends RepositorySettings {
  name: string;
  namespace_count: number;
  /** with quotas or a cache cap configured anywhere: bytes the repository holds (lib/quota) */
  used_bytes?: number;
  /** its quota, null when it has none */
  quota_bytes?: number | null;
  /** a pull-through repository's `max_cache_bytes` */
  max_cache_bytes?: number;
}

/** A configured repository as `/v2/_svc/repositories/configured` gives it: no namespace count. */
export type ConfiguredRepository = Omit<RepositorySummary, "namespace_count">;

/** Where the repositories listing reads usage from (absent: no usage fields). */
export interface UsageReader {
  /** whether any quota or cache cap is configured (the fields are shown only then) */
  shown(): boolean;
  used(repository: string): Promise<number>;
  quota(repository: string): number | null;
}

export interface NamespacesListing extends RepositorySettings {
  repository: string;
  namespaces: {
    name: string;
    tag_count: number;
    manifest_count: number;
    upload_count: number;
  }[];
  immutable_tags_exclusions: string[];
}

export interface RevisionRow {
  digest: string;
  tags: string[];
  parents?: {
    digest: string;
    tags: string[];
    platform: { os: string; architecture: string; variant?: string };
  }[];
  referrers?: { digest: string; artifactType: string }[];
  pushed_at?: string;
  last_pulled_at?: string;
  /** bytes a pull fetches: manifest, config and layers; an index adds its platforms' */
  size?: number;
  /** a single-platform image's platform, from its config */
  platform?: Platform;
  /**
   * In a repository with [verify] (issue 34): verified, unverified (warn), held (enforce:
   * waiting for its signature) or unjudged; absent for signatures and other artifacts
   */
  signature?: "verified" | "unverified" | "held" | "unjudged";
  /** tags a held image will take once released */
  held_tags?: string[];
}

/** A revision's signature state for the listing (lib/registry/signatures.ts). */
export interface RowSignature {
  state: NonNullable<RevisionRow["signature"]> | "artifact";
  heldTags: string[];
}

export interface UiConfig {
  name: string;
  oidc?: { issuer: string; client_id: string; scopes: string };
}

const unknownName = (what: string) => new RegistryError("NAME_UNKNOWN", truncate(what));

export class SvcListings {
  private readonly facts: RevisionFactsCache | null;
  /** signature states of revisions of `ns`, null where the repository verifies nothing */
  verdicts?: (ns: string, digests: string[]) => Promise<RowSignature[] | null>;

  constructor(
    private readonly cfg: Config,
    private readonly manifests: ManifestMeta,
    private readonly svc: SvcMeta,
    private readonly pulls: PullMeta,
    readBlob?: (digest: string) => Promise<Uint8Array>,
    private readonly usage?: UsageReader,
  ) {
    this.facts = readBlob ? new RevisionFactsCache(readBlob) : null;
  }

  private get concurrency(): number {
    return this.cfg.global.listingReadConcurrency;
  }

  /** Repositories holding at least one namespace with content that `admit` lets through. */
  async repositories(
    admit: Admit,
  ): Promise<{ repositories: RepositorySummary[] }> {
    const candidates: string[] = [];
    for await (const ns of this.svc.indexed()) {
      if (await admit(ns)) candidates.push(ns);
    }
    const holds = await mapBounded(
      candidates,
      this.concurrency,
      (ns) => this.manifests.hasRevisions(ns),
    );
    const counts = new Map<string, number>();
    candidates.forEach((ns, i) => {
      if (!holds[i]) return;
      const repo = repositoryOf(this.cfg, ns).name;
      counts.set(repo, (counts.get(repo) ?? 0) + 1);
    });
    const repositories: RepositorySummary[] = [...counts.keys()].sort().map((
      name,
    ) => ({
      name,
      namespace_count: counts.get(name)!,
      ...this.settings(name),
    }));
    await this.withUsage(repositories);
    return { repositories };
  }

  /**
   * Every configured repository the caller could list tags in (`admit` of its own name as a
   * namespace), whether it holds anything or not, with its settings (and usage). The repositories
   * listing leaves out one that holds nothing yet (SPEC: an empty repository is not listed, and
   * reads as an unconfigured one), so a cache before its first pull or a repository with only a
   * quota would be nowhere to see without this. No namespace is counted: the listing does that.
   */
  async configuredRepositories(
    admit: Admit,
  ): Promise<{ repositories: ConfiguredRepository[] }> {
    const repositories: ConfiguredRepository[] = [];
    for (const name of [...this.cfg.repositories.keys()].sort()) {
      if (await admit(name)) {
        repositories.push({ name, ...this.settings(name) });
      }
    }
    await this.withUsage(repositories);
    return { repositories };
  }

  /** The usage fields, when quotas or cache caps are configured anywhere. */
  private async withUsage(repositories: ConfiguredRepository[]): Promise<void> {
    const usage = this.usage?.shown() ? this.usage : null;
    if (!usage) return;
    await mapBounded(repositories, this.concurrency, async (r) => {
      r.used_bytes = await usage.used(r.name);
      r.quota_bytes = usage.quota(r.name);
      const cap = this.cfg.repositories.get(r.name)?.maxCacheBytes;
      if (cap !== undefined) r.max_cache_bytes = cap;
    });
  }

  /** SPEC: names from the category index only; an emptied namespace lists with zero counts. */
  async namespaces(
    repository: string | null,
    admit: Admit,
  ): Promise<NamespacesListing> {
    if (repository === null || !isValidName(repository)) {
      throw unknownName(repository ?? "repository parameter missing");
    }
    const names: string[] = [];
    for await (const ns of this.svc.indexed(repository)) {
      if (repositoryOf(this.cfg, ns).name === repository && await admit(ns)) {
        names.push(ns);
      }
    }
    // Empty, hidden and unconfigured repositories answer alike.
    if (names.length === 0) throw unknownName(repository);
    const namespaces = await mapBounded(
      names,
      this.concurrency,
      async (name) => {
        const [tags, revisions, uploads] = await Promise.all([
          this.manifests.listTags(name, null, null),
          this.svc.revisionCount(name),
          this.svc.uploadCount(name),
        ]);
        return {
          name,
          tag_count: tags.tags.length,
          manifest_count: revisions,
          upload_count: uploads,
        };
      },
    );
    const rc = this.cfg.repositories.get(repository);
    const exclusions = rc?.immutableTagsExclusions ??
      this.cfg.global.immutableTagsExclusions;
    return {
      repository,
      namespaces,
      ...this.settings(repository),
      immutable_tags_exclusions: exclusions.map(configuredSource),
    };
  }

  async revisions(
    ns: string,
  ): Promise<{ name: string; manifests: RevisionRow[] }> {
    const revs = await this.svc.revisions(ns);
    if (revs.length === 0) throw unknownName(ns);
    const pullTimes = this.cfg.global.updatePullTime;
    const [all, sizes, signed] = await Promise.all([
      this.svc.namespaceFacts(ns, pullTimes),
      this.facts?.facts(revs, this.concurrency) ?? null,
      this.verdicts?.(ns, revs.map((r) => r.digest)) ?? null,
    ]);
    const facts = revs.map(({ digest, rec }) => {
      // A referrer is a leaf: its times belong to its subject's view, never reported.
      const leaf = rec.subject !== undefined;
      return {
        digest,
        rec,
        leaf,
        tags: all.tags.get(digest) ?? [],
        parents: all.parents.get(digest) ?? [],
        referrers: all.referrers.get(digest) ?? [],
        pulled: pullTimes && !leaf ? all.lastPulled.get(digest) ?? null : null,
      };
    });
    const tagsOf = new Map(facts.map((f) => [f.digest, f.tags]));
    const manifests = facts.map((f, i) => {
      const row: RevisionRow = { digest: f.digest, tags: f.tags };
      const sig = signed?.[i];
      if (sig && sig.state !== "artifact") row.signature = sig.state;
      if (sig && sig.heldTags.length > 0) row.held_tags = sig.heldTags;
      if (f.parents.length > 0) {
        row.parents = f.parents.map((p) => ({
          digest: p.digest,
          tags: tagsOf.get(p.digest) ?? [],
          // buildx's convention for a child without a platform (attestations).
          platform: p.platform
            ? {
              os: p.platform.os,
              architecture: p.platform.architecture,
              ...(p.platform.variant ? { variant: p.platform.variant } : {}),
            }
            : { os: "unknown", architecture: "unknown" },
        }));
      }
      if (f.referrers.length > 0) {
        row.referrers = f.referrers.map((r) => ({
          digest: r.digest,
          artifactType: r.rec.artifactType ?? r.rec.mediaType,
        }));
      }
      if (!f.leaf && typeof f.rec.pushedAt === "number") {
        row.pushed_at = new Date(f.rec.pushedAt).toISOString();
      }
      if (f.pulled !== null) {
        row.last_pulled_at = new Date(f.pulled).toISOString();
      }
      const more = sizes?.get(f.digest);
      if (more) {
        row.size = more.size;
        if (more.platform) row.platform = more.platform;
      }
      return row;
    });
    return { name: ns, manifests };
  }

  async uploads(
    ns: string,
  ): Promise<
    {
      name: string;
      uploads: { uuid: string; size: number; started_at: string }[];
    }
  > {
    const uploads = (await this.svc.uploads(ns)).map(({ uuid, rec }) => ({
      uuid,
      size: rec.offset,
      started_at: new Date(rec.startedAt).toISOString(),
    }));
    return { name: ns, uploads };
  }

  uiConfig(): UiConfig {
    const out: UiConfig = { name: this.cfg.ui.name };
    const o = this.cfg.ui.oidc;
    const provider = o ? this.cfg.auth.oidc.get(o.provider) : undefined;
    if (o && provider) {
      out.oidc = {
        issuer: provider.issuer,
        client_id: o.clientId,
        scopes: o.scopes,
      };
    }
    return out;
  }

  private settings(repository: string): RepositorySettings {
    const rc = this.cfg.repositories.get(repository);
    return {
      pull_through_cache: (rc?.upstreams?.length ?? 0) > 0,
      upstream_urls: rc?.upstreams?.map((u) => u.url) ?? [],
      immutable_tags: rc?.immutableTags ?? this.cfg.global.immutableTags,
    };
  }
}

/** The config loader anchors exclusions as `^(?:…)$`; report them as the operator wrote them. */
function configuredSource(re: RegExp): string {
  const m = /^\^\(\?:([\s\S]*)\)\$$/.exec(re.source);
  return m ? m[1] : re.source;
}
