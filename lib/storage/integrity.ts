// Checking stored bytes against the digest that names them (issue 38). Small objects read whole
// (manifests, configs, signatures) are hashed on every read: a sha256 costs ~4 µs per 4 KiB and
// ~40 µs per 64 KiB here, noise beside a request. Large blobs are streamed unchecked and left to
// `verify` (a re-hash per GET would cap the pull throughput at the hash's ~1.7 GB/s).
import { parseDigest, RegistryError } from "../oci/mod.ts";
import { digestBytes } from "../streams/mod.ts";
import type { BlobStore } from "./blob_store.ts";

/** What a mismatch was found in, for the failure count (`wharf_integrity_failures_total`). */
export type IntegrityObject = "manifest" | "blob" | "index-table";

/**
 * Stored bytes that do not hash to their digest: a 500 whose detail names the object and what its
 * bytes hash to (SPEC §Errors: a 5XX carries INTERNAL_ERROR), never the bytes.
 */
export class CorruptBlobError extends RegistryError {
  constructor(
    readonly digest: string,
    /** what the stored bytes hash to */
    readonly found: string,
    readonly object: IntegrityObject,
  ) {
    super(
      "INTERNAL_ERROR",
      `the stored bytes of ${object} ${digest} do not match its digest (they hash to ${found}): not served`,
    );
  }
}

const failures = new Map<IntegrityObject, number>();

/** Mismatches found by reads in this process so far, per object kind (metrics pull them). */
export function integrityFailureCounts(): ReadonlyMap<IntegrityObject, number> {
  return failures;
}

/** Counts a mismatch found elsewhere (a derived table's checksum, a verify pass). */
export function countIntegrityFailure(object: IntegrityObject): void {
  failures.set(object, (failures.get(object) ?? 0) + 1);
}

const quarantined = new Map<IntegrityObject, number>();

/** Objects this process took out of serving (lib/registry/quarantine.ts), per kind. */
export function quarantinedCounts(): ReadonlyMap<IntegrityObject, number> {
  return quarantined;
}

export function countQuarantined(object: IntegrityObject): void {
  quarantined.set(object, (quarantined.get(object) ?? 0) + 1);
}

/** What `bytes` hash to under `digest`'s algorithm, or null when that is `digest` itself. */
export function mismatch(digest: string, bytes: Uint8Array): string | null {
  const d = parseDigest(digest);
  if (!d) return `unparseable digest`;
  const found = digestBytes(d.algorithm, bytes);
  return found === digest ? null : found;
}

/** `bytes` when they hash to `digest`; otherwise counts the mismatch and throws CorruptBlobError. */
export function verifiedBytes(
  digest: string,
  bytes: Uint8Array,
  object: IntegrityObject,
): Uint8Array {
  const found = mismatch(digest, bytes);
  if (found === null) return bytes;
  countIntegrityFailure(object);
  throw new CorruptBlobError(digest, found, object);
}

/** A small blob read whole from `store` and checked (configs the scanner and the UI read). */
export async function readVerified(
  store: Pick<BlobStore, "readAll">,
  digest: string,
  object: IntegrityObject = "blob",
): Promise<Uint8Array> {
  return verifiedBytes(digest, await store.readAll(digest), object);
}
