// Ending an upload session (SPEC §Blob upload, PUT and DELETE): a PUT appends its final chunk,
// checks the digest and links the blob in the commit that removes the session; a DELETE cancels.
import { parseDigest, RegistryError, requireDigest } from "../oci/mod.ts";
import { ConcurrentUploadError } from "../storage/mod.ts";
import { type UploadRecord } from "../kv/mod.ts";
import { type LinkRead, type WriteFacts } from "../metadata/mod.ts";
import type { BodyInput, UploadAppend, UploadDeps } from "./upload_append.ts";
import type { UploadStart } from "./upload_start.ts";

/** PUT completes a session (through its append and the start's quota checks); DELETE cancels. */
export class UploadCompletion {
  constructor(
    private readonly d: UploadDeps,
    private readonly appending: UploadAppend,
    private readonly starting: UploadStart,
  ) {}

  /**
   * PUT ?digest=: appends an optional final chunk and completes the session. A final chunk's
   * Content-Range follows the PATCH rules: one not resuming at the committed offset is 416.
   */
  async complete(
    ns: string,
    uuid: string,
    digestParam: string | null,
    input: BodyInput & { contentRange?: string | null },
  ): Promise<{ digest: string; size: number }> {
    // Required webhooks answer before the session is touched.
    const fx = await this.d.effects.begin({ kind: "blob-push", ns, digest: digestParam });
    try {
      return await this.completeWith(ns, uuid, digestParam, input, fx);
    } finally {
      await fx.committed();
    }
  }

  private completeWith(
    ns: string,
    uuid: string,
    digestParam: string | null,
    input: BodyInput & { contentRange?: string | null },
    fx: WriteFacts,
  ): Promise<{ digest: string; size: number }> {
    const { appending, starting } = this;
    return appending.lock.run(uuid, async () => {
      // A well-formed digest: the link its completion checks is read with the session.
      const named = digestParam === null ? null : parseDigest(digestParam);
      let link: LinkRead | undefined;
      let entry0: Deno.KvEntry<UploadRecord>;
      if (named) {
        const [session, seen] = await this.d.uploads.getWithLink(ns, uuid, named.value);
        if (!session.value) throw new RegistryError("BLOB_UPLOAD_UNKNOWN", uuid);
        entry0 = session as Deno.KvEntry<UploadRecord>;
        link = seen;
      } else entry0 = await appending.session(ns, uuid);
      const d = requireDigest(digestParam);
      if (entry0.value.pinned && d.algorithm !== entry0.value.algorithm) {
        await input.body?.cancel();
        throw new RegistryError(
          "DIGEST_INVALID",
          `session hashes ${entry0.value.algorithm}, digest is ${d.algorithm}`,
        );
      }
      let { offset, hasher, entry, moved } = await appending.append(
        ns,
        uuid,
        entry0,
        input,
        input.contentRange ?? null,
        true,
      );
      // A refused completion keeps the final chunk, as a PATCH would have.
      const keepChunk = async () => {
        if (moved) entry = await appending.advance(entry, offset);
        moved = false;
      };
      if (hasher.algorithm !== d.algorithm) {
        hasher = await appending.hashers.rehash(uuid, d.algorithm, offset);
      }
      if (hasher.peek() !== d.value) {
        appending.hashers.put(uuid, offset, hasher);
        await keepChunk();
        throw new RegistryError("DIGEST_INVALID", `uploaded content does not hash to ${d.value}`);
      }
      const done = await starting.admitted(ns, d.value, offset, async (likely) => {
        // Past the quota the session stays as it is: the client may free room and PUT again.
        if (!likely) {
          try {
            await starting.quotaRoom(ns, d.value, offset);
          } catch (e) {
            await keepChunk();
            throw e;
          }
        }
        const reserved = await this.d.blobs.reserve(d.value, offset);
        try {
          // A final chunk (written under this session's lock, from the committed offset, which
          // it truncated the file to first, and synced) leaves the file exact and durable; with
          // no body, bytes of a PATCH that died mid-write may lie past the offset.
          await this.d.store.commitUpload(uuid, d.value, offset, { synced: moved });
        } catch (e) {
          if (e instanceof ConcurrentUploadError) throw await appending.writtenTwice(ns, uuid, e);
          throw e;
        }
        appending.hashers.drop(uuid);
        const placed = starting.placed(d.value);
        try {
          return await this.d.uploads.complete(
            entry,
            ns,
            d.value,
            offset,
            reserved,
            placed,
            fx,
            link,
          );
        } catch (e) {
          // A concurrent push took the last room: the bytes already moved to the blob path
          // (unlinked, so scrub reclaims them), so the session cannot complete again.
          if (e instanceof RegistryError && e.code === "DENIED") {
            await this.d.uploads.delete(ns, uuid);
          }
          throw e;
        }
      });
      if (!done) {
        throw new RegistryError("BLOB_UPLOAD_UNKNOWN", "upload session completed concurrently");
      }
      return { digest: d.value, size: offset };
    });
  }

  cancel(ns: string, uuid: string): Promise<void> {
    return this.appending.lock.run(uuid, async () => {
      await this.appending.session(ns, uuid);
      await this.appending.reject(ns, uuid);
    });
  }
}
