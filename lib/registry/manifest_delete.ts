// Deleting manifests (SPEC §Manifests DELETE) and the rules a tag's removal and a tag's move
// both follow: immutable tags, and replication's last-writer-wins on the source's timestamp
// (X-Svc-Source-Timestamp rules 1-7).
import {
  eventTime,
  isValidTag,
  parseDigest,
  parseManifest,
  parseSourceTimestamp,
  RegistryError,
  rejectedWrite,
  truncate,
} from "../oci/mod.ts";
import { repositoryOf } from "../config/mod.ts";
import { type TagRecord } from "../kv/mod.ts";
import type { ManifestDeps, ManifestReads } from "./manifest_read.ts";

export interface DeleteOptions {
  /**
   * By digest only: an entry every commit of the delete checks, read afresh for each, that
   * calls the delete off by throwing (the cache cap's pull stamp).
   */
  unlessChanged?: () => Promise<Deno.KvEntryMaybe<unknown>>;
  /**
   * By digest only: the tags the request was authorized to remove with the manifest; finding
   * another (created meanwhile) refuses the delete, 409 DENIED.
   */
  authorizedTags?: ReadonlySet<string>;
}

/** DELETE of a tag or a revision, and which tags may not move or go. */
export class ManifestDeletes {
  constructor(
    private readonly d: ManifestDeps,
    private readonly reads: ManifestReads,
  ) {}

  /** Whether a tag of `ns` may not move: repository setting over global, minus exclusions. */
  immutability(ns: string): (tag: string) => boolean {
    const rc = repositoryOf(this.d.cfg, ns);
    const on = rc.immutableTags ?? this.d.cfg.global.immutableTags;
    const exclusions = rc.immutableTagsExclusions ?? this.d.cfg.global.immutableTagsExclusions;
    return (tag) => on && !exclusions.some((re) => re.test(tag));
  }

  /**
   * Whether deleting `tag` of `ns` (or a manifest it names) is refused: an immutable tag of a
   * hosted repository. A pull-through cache's tags follow its upstreams (a fetch moves them
   * too); its evictions and sync prunes delete them, and clients cannot write there at all.
   */
  isImmutable(ns: string, tag: string): boolean {
    if (repositoryOf(this.d.cfg, ns).upstreams?.length) return false;
    return this.immutability(ns)(tag);
  }

  /** Tags pointing at the revision `digest` of `ns` (a delete by digest removes them). */
  tagsOf(ns: string, digest: string): Promise<string[]> {
    return this.d.meta.tagsOf(ns, digest);
  }

  /**
   * DELETE of a tag or (by digest) a revision, refused (409 DENIED) when it would remove an
   * immutable tag (isImmutable): otherwise a delete and a push would move it.
   */
  async delete(
    ns: string,
    reference: string,
    sourceTimestamp: string | null,
    opts: DeleteOptions = {},
  ): Promise<void> {
    const lww = parseSourceTimestamp(sourceTimestamp);
    const guard = (tag: string, t: TagRecord) => {
      if (lww !== null && t.createdAt !== undefined && t.createdAt > lww) {
        throw new RegistryError(
          "REPLICATION_SUPERSEDED",
          "a tag was written after the source event",
        );
      }
      if (this.isImmutable(ns, tag)) {
        throw rejectedWrite(
          `tag ${tag} is immutable: neither it nor the manifest it names can be deleted`,
        );
      }
      if (opts.authorizedTags && !opts.authorizedTags.has(tag)) {
        throw rejectedWrite(`tag ${tag} was created while the delete was being authorized: retry`);
      }
    };
    if (!parseDigest(reference)) {
      if (!isValidTag(reference)) {
        throw new RegistryError("UNSUPPORTED", `invalid tag ${truncate(reference)}`);
      }
      const tagged = await this.d.meta.tag(ns, reference);
      const fx = await this.d.effects.begin({
        kind: "tag-delete",
        ns,
        tag: reference,
        digest: tagged?.digest ?? null,
        at: lww ?? eventTime(),
      });
      try {
        await this.d.meta.deleteTag(ns, reference, (t) => guard(reference, t), fx);
      } finally {
        await fx.committed();
      }
      return;
    }
    const rev = await this.d.meta.revision(ns, reference);
    if (!rev) throw new RegistryError("MANIFEST_UNKNOWN", reference);
    const parsed = parseManifest(await this.reads.body(reference, rev), rev.mediaType);
    // A delete's jobs carry its event time: the source's timestamp when it was replicated.
    const fx = await this.d.effects.begin({
      kind: "manifest-delete",
      ns,
      digest: reference,
      at: lww ?? eventTime(),
    });
    try {
      await this.d.meta.deleteRevision({
        ns,
        digest: reference,
        parsed,
        guard,
        fx,
        unlessChanged: opts.unlessChanged,
      });
    } finally {
      await fx.committed();
    }
  }
}
