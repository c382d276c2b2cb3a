// Blob HEAD/GET/DELETE within a namespace (SPEC §Blobs). Visibility is ownership: a digest the
// namespace has no link for is BLOB_UNKNOWN even when its bytes exist.
import { type RangeResult, RegistryError, resolveRange } from "../oci/mod.ts";
import type { BlobStore } from "../storage/mod.ts";
import type { BlobMeta, ManifestMeta } from "../metadata/mod.ts";
import type { WriteEffects } from "../effects/mod.ts";

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

export class Blobs {
  constructor(
    private readonly store: BlobStore,
    private readonly meta: BlobMeta,
    private readonly manifests: ManifestMeta,
    private readonly effects: WriteEffects,
  ) {}

  async read(
    ns: string,
    digest: string,
    rangeHeader: string | null,
    withBody: boolean,
    redirect = false,
  ): Promise<BlobRead> {
    const link = await this.meta.link(ns, digest);
    if (!link) return await this.readManifestAsBlob(ns, digest, rangeHeader, withBody);
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
    try {
      const stream = await this.store.read(
        digest,
        range.kind === "partial" ? range : undefined,
        link.size,
      );
      return { size: link.size, range, stream };
    } catch (e) {
      if (e instanceof Deno.errors.NotFound) {
        throw new RegistryError("BLOB_UNKNOWN", `${digest} (bytes missing)`);
      }
      throw e;
    }
  }

  /** A manifest is content too: clients may fetch it through the blob endpoint. */
  private async readManifestAsBlob(
    ns: string,
    digest: string,
    rangeHeader: string | null,
    withBody: boolean,
  ) {
    const rev = await this.manifests.revision(ns, digest);
    if (!rev) throw new RegistryError("BLOB_UNKNOWN", digest);
    const range = resolveRange(rangeHeader, rev.size);
    if (!withBody || range.kind === "unsatisfiable") return { size: rev.size, range };
    const body = rev.body ?? await this.store.readAll(digest);
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
