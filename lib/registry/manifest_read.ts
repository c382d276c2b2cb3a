// Reading manifests (SPEC §Manifests rule 2): a reference resolved to its revision, and the
// revision served: its body (checked against its digest on every read, quarantined when it
// fails), a redirect to it, or for HEAD its record alone.
import { RegistryError, truncate } from "../oci/mod.ts";
import type { Config } from "../config/mod.ts";
import {
  type BlobStore,
  CorruptBlobError,
  countIntegrityFailure,
  mismatch,
} from "../storage/mod.ts";
import type { Quarantine } from "./quarantine.ts";
import { log } from "../log.ts";
import { type RevisionRecord } from "../kv/mod.ts";
import { type BlobMeta, type ManifestMeta } from "../metadata/mod.ts";
import type { UsageLedger } from "../metadata/mod.ts";
import type { WriteEffects } from "../effects/mod.ts";

/** What the manifest parts stand on (Manifests' constructor arguments). */
export interface ManifestDeps {
  cfg: Config;
  store: BlobStore;
  meta: ManifestMeta;
  blobs: BlobMeta;
  /** the jobs and events a push or delete causes, committed with it */
  effects: WriteEffects;
  /** quotas: each commit admitted by the ledger with the manifest's bytes (usage.ts) */
  usage?: UsageLedger;
  /** bodies that fail their digest are quarantined (quarantine.ts) */
  quarantine?: Pick<Quarantine, "quarantine" | "flagInline" | "explain">;
}

export interface ManifestBody {
  digest: string;
  mediaType: string;
  size: number;
  /** null for HEAD when the body is not inline (no byte read needed), and with `redirect` */
  body: Uint8Array | null;
  /** a presigned URL of the body in the blob store, keeping the media type, for a 307 */
  redirect?: string;
}

/** A revision whose body is not in the blob store (quarantined, or lost): 500 saying which. */
export class BodyUnavailableError extends RegistryError {
  constructor(detail: string) {
    super("INTERNAL_ERROR", detail);
  }
}

/** GET and HEAD of a manifest, and every reader's checked body. */
export class ManifestReads {
  constructor(private readonly d: ManifestDeps) {}

  async resolve(ns: string, reference: string): Promise<{ digest: string; rev: RevisionRecord }> {
    let digest = reference;
    if (!reference.includes(":")) {
      const t = await this.d.meta.tag(ns, reference);
      if (!t) throw new RegistryError("MANIFEST_UNKNOWN", `${truncate(ns)}:${truncate(reference)}`);
      digest = t.digest;
    }
    const rev = await this.d.meta.revision(ns, digest);
    if (!rev) throw new RegistryError("MANIFEST_UNKNOWN", `${truncate(ns)}@${truncate(reference)}`);
    return { digest, rev };
  }

  async get(
    ns: string,
    reference: string,
    withBody: boolean,
    redirect = false,
  ): Promise<ManifestBody> {
    const { digest, rev } = await this.resolve(ns, reference);
    return await this.serve(digest, rev, ns, withBody, redirect);
  }

  /** A resolved revision's answer: its body, a redirect to it, or (HEAD) its record alone. */
  async serve(
    digest: string,
    rev: RevisionRecord,
    ns: string,
    withBody: boolean,
    redirect: boolean,
  ): Promise<ManifestBody> {
    // Only bodies kept in the blob store can be redirected to; small ones live in KV.
    if (withBody && redirect && !rev.body && this.d.store.presign) {
      const url = await this.d.store.presign(digest, { contentType: rev.mediaType });
      return { digest, mediaType: rev.mediaType, size: rev.size, body: null, redirect: url };
    }
    // HEAD answers from the record (no bytes go out); a GET's body is checked (`body`).
    const body = withBody ? await this.body(digest, rev, ns) : rev.body ?? null;
    return { digest, mediaType: rev.mediaType, size: rev.size, body };
  }

  /**
   * The stored body of a revision (inline or in the blob store), checked against its digest on
   * every read: bytes that do not hash to it are never returned (500 naming the cause) and are
   * quarantined. `ns`: the revision's namespace, when the caller knows it.
   */
  async body(digest: string, rev: RevisionRecord, ns: string | null = null): Promise<Uint8Array> {
    const bytes = rev.body ?? await this.storedBody(digest);
    const found = mismatch(digest, bytes);
    if (found === null) return bytes;
    countIntegrityFailure("manifest");
    try {
      if (rev.body) await this.d.quarantine?.flagInline(ns, digest, found, bytes.byteLength);
      else await this.d.quarantine?.quarantine(digest);
    } catch (e) {
      log.error("could not quarantine a manifest body that failed verification", {
        digest,
        error: e instanceof Error ? e.message : String(e),
      });
    }
    throw new CorruptBlobError(digest, found, "manifest");
  }

  /** A body kept in the blob store; a missing one is a 500 saying why (quarantined, or lost). */
  private async storedBody(digest: string): Promise<Uint8Array> {
    try {
      return await this.d.store.readAll(digest);
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
      throw new BodyUnavailableError(
        (await this.d.quarantine?.explain(digest)) ??
          `the stored body of manifest ${digest} is missing from the blob store`,
      );
    }
  }
}
