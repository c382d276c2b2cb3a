// Manifests of a pull-through namespace: one by digest, or a tag of an immutable repository,
// comes from the cache once cached; a mutable tag is checked with a HEAD (at most once per
// revalidate_secs) and refetched when its digest moved; when every upstream is down the cached
// copy is served with a Warning (stale beats down); a cached body that fails its digest is
// fetched again. Manifests are stored byte-exact as served, after their digest was verified.
import {
  parseDigest,
  type ParsedManifest,
  RegistryError,
  truncate,
  upstreamFailed,
} from "../oci/mod.ts";
import { type RepositoryConfig } from "../config/mod.ts";
import { type RevisionRecord } from "../kv/mod.ts";
import { isUpstreamError, type UpstreamSet } from "../upstream/mod.ts";
import { log } from "../log.ts";
import { CorruptBlobError } from "../storage/mod.ts";
import type { PulledManifest } from "./ports.ts";
import {
  clientError,
  type PullThroughDeps,
  type PullUpstreams,
  upstreamMessage,
} from "./pull_upstreams.ts";
import type { PullBlobs } from "./pull_blobs.ts";

/** The Warning a stale manifest is served with (RFC 9111 warn-code 110). */
export const STALE_WARNING = '110 wharf "Response is Stale: every upstream is unavailable"';

/** Manifest reads: cached, revalidated, fetched, or stale. */
export class PullManifests {
  constructor(
    private readonly d: PullThroughDeps,
    private readonly upstreams: PullUpstreams,
    private readonly blobs: PullBlobs,
  ) {}

  private immutable(rc: RepositoryConfig, tag: string): boolean {
    const on = rc.immutableTags ?? this.d.cfg.global.immutableTags;
    const exclusions = rc.immutableTagsExclusions ?? this.d.cfg.global.immutableTagsExclusions;
    return on && !exclusions.some((re) => re.test(tag));
  }

  async manifest(
    rc: RepositoryConfig,
    ns: string,
    reference: string,
    accept: string | null,
    withBody: boolean,
  ): Promise<PulledManifest> {
    const byDigest = parseDigest(reference) !== null;
    const local = await this.cached(ns, reference);
    if (local && (byDigest || this.immutable(rc, reference))) {
      this.d.observe?.("manifest", "hit");
      return await this.serveChecked(rc, ns, local, withBody, accept);
    }
    if (local && rc.revalidateSecs) {
      const seen = await this.d.checks.get(ns, reference);
      if (seen && seen.digest === local.digest && Date.now() - seen.at < rc.revalidateSecs * 1000) {
        this.d.observe?.("manifest", "hit");
        return await this.serveChecked(rc, ns, local, withBody, accept);
      }
    }
    const up = this.upstreams.set(rc);
    try {
      if (local) {
        const head = await up.headManifest(ns, reference, accept);
        if (head.digest === local.digest) {
          await this.d.checks.record(ns, reference, local.digest);
          this.d.observe?.("manifest", "revalidated");
          return await this.serveChecked(rc, ns, local, withBody, accept);
        }
        // Moved upstream: fetch the new revision by its digest (the tag could move again).
        const fetched = await this.fetch(rc, up, ns, head.digest, accept, reference);
        this.d.observe?.("manifest", "refreshed");
        return fetched;
      }
      const fetched = await this.fetch(rc, up, ns, reference, accept, byDigest ? null : reference);
      this.d.observe?.("manifest", "miss");
      return fetched;
    } catch (e) {
      if (local && isUpstreamError(e) && e.down) {
        log.warn("serving a cached manifest: every upstream is down", {
          namespace: ns,
          reference: truncate(reference),
          error: e.message,
        });
        this.d.observe?.("manifest", "stale");
        return { ...(await this.serve(local, withBody)), warning: STALE_WARNING };
      }
      this.d.observe?.("manifest", "error");
      throw clientError(e, () =>
        new RegistryError(
          "MANIFEST_UNKNOWN",
          `${truncate(ns)}:${truncate(reference)} not found upstream (${upstreamMessage(e)})`,
        ));
    }
  }

  private async fetch(
    rc: RepositoryConfig,
    up: UpstreamSet,
    ns: string,
    reference: string,
    accept: string | null,
    tag: string | null,
  ): Promise<PulledManifest> {
    const m = await up.getManifest(ns, reference, accept, this.d.cfg.global.maxManifestSize);
    const cap = this.d.cacheCap;
    let rec: RevisionRecord;
    let parsed: ParsedManifest;
    try {
      const store = () => this.d.manifests.storeFetched(ns, m.digest, m.bytes, m.mediaType, tag);
      const stored = cap
        ? await cap.hold(ns, m.digest, async () => {
          await cap.makeRoom(rc, ns, m.bytes.byteLength, [m.digest]);
          const r = await store();
          cap.touched(rc, ns, m.digest);
          return r;
        })
        : await store();
      rec = stored.record;
      parsed = stored.parsed;
    } catch (e) {
      if (e instanceof RegistryError && e.code === "MANIFEST_INVALID") {
        throw upstreamFailed(
          `upstream served an unusable manifest for ${truncate(reference)}: ${e.detail}`,
        );
      }
      throw e;
    }
    this.blobs.awaitLayerGet(rc, ns, parsed);
    if (tag !== null) await this.d.checks.record(ns, tag, m.digest);
    return { digest: m.digest, mediaType: rec.mediaType, size: m.bytes.byteLength, body: m.bytes };
  }

  private async cached(
    ns: string,
    reference: string,
  ): Promise<{ digest: string; rev: RevisionRecord } | null> {
    try {
      return await this.d.manifests.resolve(ns, reference);
    } catch (e) {
      if (e instanceof RegistryError && e.code === "MANIFEST_UNKNOWN") return null;
      throw e;
    }
  }

  private async serve(
    local: { digest: string; rev: RevisionRecord },
    withBody: boolean,
    rc?: RepositoryConfig,
    ns?: string,
  ): Promise<PulledManifest> {
    if (rc && ns) this.d.cacheCap?.touched(rc, ns, local.digest);
    // A GET's body is checked against its digest (Manifests.body); HEAD sends none.
    const body = withBody
      ? await this.d.manifests.body(local.digest, local.rev, ns ?? null)
      : local.rev.body ?? null;
    return { digest: local.digest, mediaType: local.rev.mediaType, size: local.rev.size, body };
  }

  /**
   * The cached copy; when its stored body fails its digest (the read quarantined it) or is gone
   * from the store for that reason, the upstream's, fetched again by digest: a cache never
   * serves rot, it refetches. Should the upstream not have it, the cached copy's error stands.
   */
  private async serveChecked(
    rc: RepositoryConfig,
    ns: string,
    local: { digest: string; rev: RevisionRecord },
    withBody: boolean,
    accept: string | null,
  ): Promise<PulledManifest> {
    try {
      return await this.serve(local, withBody, rc, ns);
    } catch (e) {
      if (!(e instanceof CorruptBlobError || this.d.bodyUnavailable(e))) throw e;
      log.warn("fetching a cached manifest again: its stored body failed verification", {
        namespace: ns,
        digest: local.digest,
      });
      try {
        const fetched = await this.fetch(
          rc,
          this.upstreams.set(rc),
          ns,
          local.digest,
          accept,
          null,
        );
        this.d.observe?.("manifest", "refetched");
        return fetched;
      } catch (e2) {
        this.d.observe?.("manifest", "error");
        throw clientError(e2, () => e as RegistryError);
      }
    }
  }
}
