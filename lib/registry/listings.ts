// Tag list, catalog and referrers (SPEC §Tags, §Catalog, §Referrers).
import { isMediaType, isValidTag, parseDigest, RegistryError, truncate } from "../oci/mod.ts";
import type { ManifestMeta } from "../metadata/mod.ts";
import type { Manifests } from "./manifests.ts";

export interface ReferrerDescriptor {
  mediaType: string;
  digest: string;
  size: number;
  artifactType?: string;
  annotations?: Record<string, string>;
}

export const REFERRERS_PAGE = 100;

export class Listings {
  constructor(private readonly meta: ManifestMeta, private readonly manifests: Manifests) {}

  async tags(
    ns: string,
    n: number | null,
    last: string | null,
  ): Promise<{ tags: string[]; more: boolean }> {
    const page = await this.meta.listTags(ns, n, last);
    if (page.tags.length === 0 && !(await this.meta.hasRevisions(ns))) {
      // A namespace with no manifest content is unknown (SPEC §Tags).
      throw new RegistryError("NAME_UNKNOWN", truncate(ns));
    }
    return page;
  }

  catalog(n: number, last: string | null, admit: (ns: string) => boolean | Promise<boolean>) {
    return this.meta.catalog(n, last, admit);
  }

  validReferrersQuery(subject: string, artifactType: string | null): boolean {
    return parseDigest(subject) !== null && (artifactType === null || isMediaType(artifactType));
  }

  /** `upstream`: a pull-through cache's upstream referrers, merged under the cached ones. */
  async referrers(
    ns: string,
    subject: string,
    artifactType: string | null,
    last: string | null,
    upstream: ReferrerDescriptor[] = [],
  ): Promise<{ manifests: ReferrerDescriptor[]; next: string | null }> {
    const d = parseDigest(subject);
    if (!d) {
      throw new RegistryError("DIGEST_INVALID", `invalid subject digest ${truncate(subject)}`);
    }
    if (artifactType !== null && !isMediaType(artifactType)) {
      throw new RegistryError(
        "DIGEST_INVALID",
        `artifactType ${truncate(artifactType)} is not a media type`,
      );
    }
    const byDigest = new Map<string, ReferrerDescriptor>();
    for (const { digest, rec } of await this.meta.referrers(ns, d.value)) {
      byDigest.set(digest, { ...rec, digest });
    }
    for (const desc of await this.fallbackTag(ns, `${d.algorithm}-${d.hex}`)) {
      if (!byDigest.has(desc.digest)) byDigest.set(desc.digest, desc);
    }
    for (const desc of upstream) {
      if (!byDigest.has(desc.digest)) byDigest.set(desc.digest, desc);
    }
    const all = [...byDigest.values()]
      .filter((x) => artifactType === null || x.artifactType === artifactType)
      .sort((a, b) => (a.digest < b.digest ? -1 : a.digest > b.digest ? 1 : 0));
    const from = last === null ? 0 : all.findIndex((x) => x.digest > last);
    const start = from < 0 ? all.length : from;
    const page = all.slice(start, start + REFERRERS_PAGE);
    const next = start + REFERRERS_PAGE < all.length ? page[page.length - 1].digest : null;
    return { manifests: page, next };
  }

  /** Referrers recorded before the API existed: an index under tag `<alg>-<hex>` (rule 4). */
  private async fallbackTag(ns: string, tag: string): Promise<ReferrerDescriptor[]> {
    if (!isValidTag(tag)) return [];
    const t = await this.meta.tag(ns, tag);
    if (!t) return [];
    const rev = await this.meta.revision(ns, t.digest);
    if (!rev) return [];
    try {
      const doc = JSON.parse(new TextDecoder().decode(await this.manifests.body(t.digest, rev)));
      if (!Array.isArray(doc.manifests)) return [];
      return doc.manifests
        .filter((m: Record<string, unknown>) =>
          typeof m?.digest === "string" && parseDigest(m.digest) &&
          typeof m.mediaType === "string" &&
          typeof m.size === "number"
        )
        .map((m: Record<string, unknown>) => {
          const out: ReferrerDescriptor = {
            mediaType: m.mediaType as string,
            digest: m.digest as string,
            size: m.size as number,
          };
          if (typeof m.artifactType === "string") out.artifactType = m.artifactType;
          if (m.annotations && typeof m.annotations === "object") {
            out.annotations = m.annotations as Record<string, string>;
          }
          return out;
        });
    } catch {
      return [];
    }
  }
}
