// Blob HEAD/GET/DELETE within a namespace (SPEC §Blobs). Visibility is ownership: a digest the
// namespace has no link for is BLOB_UNKNOWN even when its bytes exist.
import { type RangeResult, RegistryError, resolveRange } from "../oci/mod.ts";
import {
  type BlobStore,
  CorruptBlobError,
  countIntegrityFailure,
  mismatch,
} from "../storage/mod.ts";
import type { RevisionRecord } from "../kv/mod.ts";
import type { BlobMeta, ManifestMeta } from "../metadata/mod.ts";
import type { WriteEffects } from "../effects/mod.ts";
import type { Quarantine } from "./quarantine.ts";
import { log } from "../log.ts";

export interface BlobRead {
  /** null when not known yet (a pull-through fill of an upstream that sent no length) */
  size: number | null;
  range: RangeResult;
  /** absent for HEAD */
  stream?: ReadableStream<Uint8Array>;
  /**
   * An upstream's answer passed through (SPEC §Blobs rule 8: a range over a blob not yet
   * cached): its status and Content-Range, whatever `range` says.
   */
  upstream?: { status: number; contentRange: string | null };
  /** a presigned URL to answer 307 with instead of a body (SPEC §Blobs, Redirects) */
  redirect?: string;
}

const ANCHORED = /^bytes=\d+-\d*$/;

/**
 * Blobs up to this size (configs, signature payloads, small attestations) are read whole and
 * checked against their digest on every GET: a sha256 of 256 KiB takes ~150 µs here, of a
 * typical 4 KiB config ~4 µs. Larger ones stream unchecked (`verify` re-hashes them).
 */
export const VERIFIED_BLOB_MAX = 256 * 1024;

/** What the blob reads need of quarantine and of the manifests' checked bodies. */
export interface BlobIntegrity {
  quarantine: Pick<Quarantine, "quarantine" | "explain">;
  /** a revision's body, checked against its digest (Manifests.body) */
  manifestBody(ns: string, digest: string, rev: RevisionRecord): Promise<Uint8Array>;
}

export class Blobs {
  constructor(
    private readonly store: BlobStore,
    private readonly meta: BlobMeta,
    private readonly manifests: ManifestMeta,
    private readonly effects: WriteEffects,
    private readonly integrity: BlobIntegrity,
  ) {}

  async read(
    ns: string,
    digest: string,
    rangeHeader: string | null,
    withBody: boolean,
    redirect = false,
    /** false: a BLOB_UNKNOWN need not say why (a pull-through read fetches it instead) */
    explain = true,
  ): Promise<BlobRead> {
    const link = await this.meta.link(ns, digest);
    if (!link) return await this.readManifestAsBlob(ns, digest, rangeHeader, withBody, explain);
    const range = resolveRange(rangeHeader, link.size);
    if (!withBody || range.kind === "unsatisfiable") return { size: link.size, range };
    // The client sends its Range again to the presigned URL, which S3 answers itself. Only a
    // whole GET or a start-anchored range (what resuming clients send) goes there: suffix and
    // unreadable ranges have SPEC rules that S3-compatible servers do not all keep (s3rver
    // reads `bytes=-10` as 0-10), so those are answered here.
    if (redirect && this.store.presign && (rangeHeader === null || ANCHORED.test(rangeHeader))) {
      return {
        size: link.size,
        range,
        redirect: await this.store.presign(digest, { contentType: "application/octet-stream" }),
      };
    }
    if (link.size <= VERIFIED_BLOB_MAX) {
      const bytes = await this.small(digest);
      const part = range.kind === "partial" ? bytes.subarray(range.start, range.end + 1) : bytes;
      return { size: link.size, range, stream: ReadableStream.from([part]) };
    }
    try {
      const stream = await this.store.read(
        digest,
        range.kind === "partial" ? range : undefined,
        link.size,
      );
      return { size: link.size, range, stream };
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) throw await this.unknown(digest, "bytes missing");
      throw e;
    }
  }

  /**
   * A small blob's bytes, checked: bytes that do not hash to the digest are quarantined (which
   * unlinks them, so the next read is BLOB_UNKNOWN saying why) and answered 500 with the cause.
   */
  private async small(digest: string): Promise<Uint8Array> {
    let bytes: Uint8Array;
    try {
      bytes = await this.store.readAll(digest);
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) throw await this.unknown(digest, "bytes missing");
      throw e;
    }
    const found = mismatch(digest, bytes);
    if (found === null) return bytes;
    countIntegrityFailure("blob");
    await this.integrity.quarantine.quarantine(digest).catch((e) =>
      log.error("could not quarantine a blob that failed verification", {
        digest,
        error: e instanceof Error ? e.message : String(e),
      })
    );
    throw new CorruptBlobError(digest, found, "blob");
  }

  /** BLOB_UNKNOWN, saying why when the digest was quarantined. */
  private async unknown(digest: string, why?: string): Promise<RegistryError> {
    const quarantined = await this.integrity.quarantine.explain(digest);
    return new RegistryError("BLOB_UNKNOWN", quarantined ?? (why ? `${digest} (${why})` : digest));
  }

  /** A manifest is content too: clients may fetch it through the blob endpoint. */
  private async readManifestAsBlob(
    ns: string,
    digest: string,
    rangeHeader: string | null,
    withBody: boolean,
    explain = true,
  ) {
    const rev = await this.manifests.revision(ns, digest);
    if (!rev) {
      throw explain ? await this.unknown(digest) : new RegistryError("BLOB_UNKNOWN", digest);
    }
    const range = resolveRange(rangeHeader, rev.size);
    if (!withBody || range.kind === "unsatisfiable") return { size: rev.size, range };
    const body = await this.integrity.manifestBody(ns, digest, rev);
    const part = range.kind === "partial" ? body.subarray(range.start, range.end + 1) : body;
    return { size: rev.size, range, stream: ReadableStream.from([part]) };
  }

  /** Unlinks `digest` from `ns`; the events it causes go in the same commit. */
  async delete(ns: string, digest: string): Promise<void> {
    const fx = await this.effects.begin({ kind: "blob-delete", ns, digest });
    try {
      await this.meta.unlink(ns, digest, fx);
    } finally {
      await fx.committed();
    }
  }
}
