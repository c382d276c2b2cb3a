// What the manifests list shows beside each revision without a click (docs/api.md#revisions):
// the size a pull fetches and, for a single-platform image, the platform its config names. Both
// derive from content addressed by digest, so they are remembered per digest in this process
// (a cache, never the truth: a restart recomputes them).
import { INDEX_TYPES } from "../oci/mod.ts";
import type { RevisionRecord } from "../kv/mod.ts";
import { mapBounded } from "./map_bounded.ts";
import { verifiedBytes } from "../storage/mod.ts";

export interface Platform {
  os: string;
  architecture: string;
  variant?: string;
}

export interface RevisionFacts {
  /** manifest + config + layers for an image; the index's own bytes plus its children's */
  size: number;
  /** an image's platform from its config; absent for indexes, artifacts and unreadable configs */
  platform?: Platform;
}

/** Own facts of one manifest: its pull size before children are added, and its children. */
interface OwnFacts {
  size: number;
  platform?: Platform;
  children?: { digest: string; size: number }[];
  /** the config could not be read now (a pull-through cache may fetch it later): not cached */
  partial?: boolean;
}

/** Image configs this size or larger are not read for a platform (configs are ~1-20 KiB). */
const MAX_CONFIG_BYTES = 1 << 20;
const CACHE_LIMIT = 50_000;
const CONFIG_TYPES = new Set([
  "application/vnd.oci.image.config.v1+json",
  "application/vnd.docker.container.image.v1+json",
]);

type Reader = (digest: string) => Promise<Uint8Array>;

const num = (v: unknown) => (typeof v === "number" && Number.isSafeInteger(v) && v >= 0 ? v : 0);
const str = (v: unknown) => (typeof v === "string" && v.length <= 128 ? v : undefined);

export class RevisionFactsCache {
  private readonly own = new Map<string, OwnFacts>();

  constructor(private readonly readBlob: Reader) {}

  /** Facts of each digest given; children of an index are looked up among `all` first. */
  async facts(
    all: { digest: string; rec: RevisionRecord }[],
    concurrency: number,
  ): Promise<Map<string, RevisionFacts>> {
    const owns = await mapBounded(all, concurrency, ({ digest, rec }) => this.ownOf(digest, rec));
    const byDigest = new Map(all.map((r, i) => [r.digest, owns[i]]));
    const out = new Map<string, RevisionFacts>();
    for (const [digest, f] of byDigest) {
      let size = f.size;
      for (const c of f.children ?? []) {
        const child = byDigest.get(c.digest);
        size += child && !child.children ? child.size : c.size;
      }
      out.set(digest, f.platform ? { size, platform: f.platform } : { size });
    }
    return out;
  }

  private async ownOf(digest: string, rec: RevisionRecord): Promise<OwnFacts> {
    const hit = this.own.get(digest);
    if (hit) return hit;
    let f: OwnFacts;
    try {
      f = await this.compute(digest, rec);
    } catch {
      // A body that vanished (scrub) or does not parse: its stored size is all that is known.
      return { size: rec.size };
    }
    if (f.partial) return f;
    if (this.own.size >= CACHE_LIMIT) this.own.delete(this.own.keys().next().value!);
    this.own.set(digest, f);
    return f;
  }

  private async compute(digest: string, rec: RevisionRecord): Promise<OwnFacts> {
    // Checked like every read of a body (a reader given here checks what it reads).
    const body = rec.body
      ? verifiedBytes(digest, rec.body, "manifest")
      : await this.readBlob(digest);
    const m = JSON.parse(new TextDecoder().decode(body)) as Record<string, unknown>;
    const mediaType = str(m.mediaType) ?? rec.mediaType;
    if (INDEX_TYPES.has(mediaType) || Array.isArray(m.manifests)) {
      const children = (Array.isArray(m.manifests) ? m.manifests : []).flatMap((d) =>
        d && typeof d === "object" && typeof d.digest === "string"
          ? [{ digest: d.digest as string, size: num(d.size) }]
          : []
      );
      return { size: rec.size, children };
    }
    const config = m.config as Record<string, unknown> | undefined;
    const layers = Array.isArray(m.layers) ? m.layers : [];
    let size = rec.size + num(config?.size);
    for (const l of layers) size += num(l?.size);
    if (!config) return { size };
    try {
      const platform = await this.platformOf(config);
      return platform ? { size, platform } : { size };
    } catch {
      return { size, partial: true };
    }
  }

  private async platformOf(config: Record<string, unknown>): Promise<Platform | undefined> {
    const digest = str(config.digest);
    const size = num(config.size);
    if (!digest || !CONFIG_TYPES.has(String(config.mediaType)) || size >= MAX_CONFIG_BYTES) {
      return undefined;
    }
    const c = JSON.parse(new TextDecoder().decode(await this.readBlob(digest)));
    const os = str(c?.os), architecture = str(c?.architecture), variant = str(c?.variant);
    if (!os || !architecture) return undefined;
    return variant ? { os, architecture, variant } : { os, architecture };
  }
}
