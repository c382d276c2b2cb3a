// What a pull-through namespace shows of its upstreams beside an image: their referrers of a
// subject (SPEC §Referrers rule 5) and their signatures of an image, fetched and stored with it
// (issue 34, pull_signatures.ts).
import { type Descriptor } from "../oci/mod.ts";
import { type RepositoryConfig } from "../config/mod.ts";
import { log } from "../log.ts";
import { fetchSignatures } from "./pull_signatures.ts";
import { type PullThroughDeps, type PullUpstreams, upstreamMessage } from "./pull_upstreams.ts";
import type { PullBlobs } from "./pull_blobs.ts";

/** Upstream referrers and signatures. */
export class PullReferrers {
  constructor(
    private readonly d: PullThroughDeps,
    private readonly upstreams: PullUpstreams,
    private readonly blobs: PullBlobs,
  ) {}

  /**
   * The upstream's signatures of `digest` (its cosign `.sig` tag, its signature referrers),
   * fetched and stored beside it (issue 34): what a verdict of a cached image is judged from.
   */
  fetchSignatures(rc: RepositoryConfig, ns: string, digest: string): Promise<number> {
    const signal = AbortSignal.timeout(120_000);
    return fetchSignatures(
      {
        manifests: this.d.manifests,
        sources: this.d.signatureSources,
        maxManifestSize: this.d.cfg.global.maxManifestSize,
        ensureBlob: (rc, ns, d) => this.blobs.ensureBlob(rc, ns, d, signal, false),
      },
      rc,
      this.upstreams.set(rc),
      ns,
      digest,
    );
  }

  /** Referrers rule 5: the upstream's referrers of `subject`; an unreachable upstream is left out. */
  async referrers(
    rc: RepositoryConfig,
    ns: string,
    subject: string,
    artifactType: string | null,
  ): Promise<Descriptor[]> {
    try {
      const found = await this.upstreams.set(rc).getReferrers(
        ns,
        subject,
        artifactType ?? undefined,
      );
      return found.map((d) => {
        const out: Descriptor = { mediaType: d.mediaType, digest: d.digest, size: d.size };
        if (d.artifactType !== undefined) out.artifactType = d.artifactType;
        if (d.annotations !== undefined) out.annotations = d.annotations;
        return out;
      });
    } catch (e) {
      log.warn("upstream referrers left out", { namespace: ns, error: upstreamMessage(e) });
      return [];
    }
  }
}
