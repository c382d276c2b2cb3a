// What the pull-through cache needs of the registry that builds it, and what it answers, as
// narrow shapes: lib/registry imports this folder, so nothing here may import lib/registry back.
// The registry hands its manifests and its verified-before-visible rules in; its own answer types
// (BlobRead, ManifestBody) are supersets of the ones below.
import type { ParsedManifest, RangeResult } from "../oci/mod.ts";
import type { RevisionRecord } from "../kv/mod.ts";

/** The registry's manifests, as far as the cache reads, stores and evicts them. */
export interface CacheManifests {
  /** MANIFEST_UNKNOWN when `reference` is not in `ns` */
  resolve(ns: string, reference: string): Promise<{ digest: string; rev: RevisionRecord }>;
  /** The stored body, checked against its digest. */
  body(digest: string, rev: RevisionRecord, ns?: string | null): Promise<Uint8Array>;
  /** Stores a fetched manifest byte-exact under its verified digest, `tag` pointing at it. */
  storeFetched(
    ns: string,
    digest: string,
    bytes: Uint8Array,
    contentType: string | null,
    tag: string | null,
  ): Promise<{ record: RevisionRecord; parsed: ParsedManifest }>;
  /**
   * Deletes revision `digest` of `ns` with its tags; `unlessChanged` is read afresh by every
   * commit of the delete and calls it off by throwing (the cache cap's pull stamp).
   */
  delete(
    ns: string,
    digest: string,
    sourceTimestamp: null,
    opts: { unlessChanged: () => Promise<Deno.KvEntryMaybe<unknown>> },
  ): Promise<void>;
}

/**
 * Where an image's signatures are found: the registry's verified-before-visible rules, handed
 * in so the cache fetches exactly what a verdict is judged from.
 */
export interface SignatureSources {
  /** the tag cosign writes the signature of `digest` under, or null */
  cosignTag(digest: string): string | null;
  /** whether a referrer of this artifact type (else media type) is a signature */
  isSignature(artifactType: string | undefined, mediaType: string): boolean;
}

/** A manifest as the cache serves it. */
export interface PulledManifest {
  digest: string;
  mediaType: string;
  size: number;
  /** null for HEAD when the body is not inline */
  body: Uint8Array | null;
  /** set when the cached copy is served because every upstream is down */
  warning?: string;
}

/** A blob (or range) as the cache serves it: from a fill, or an upstream's answer passed on. */
export interface PulledBlob {
  /** null when not known yet (an upstream that sent no length) */
  size: number | null;
  range: RangeResult;
  /** absent for HEAD */
  stream?: ReadableStream<Uint8Array>;
  /**
   * An upstream's answer passed through (SPEC §Blobs rule 8: a range over a blob not yet
   * cached): its status and Content-Range, whatever `range` says.
   */
  upstream?: { status: number; contentRange: string | null };
}
