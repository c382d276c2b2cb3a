// Every answer whose status or headers are not its code's defaults (errors.ts), one factory per
// meaning. SPEC §Errors pairs some codes with more than one status (DENIED 403/405/409,
// MANIFEST_INVALID 400/413) and a few answers must carry headers (Retry-After, Content-Range,
// Allow); naming them here keeps a throw site from choosing a status by hand, and lets
// routes/errors_test.ts walk each one through the mapper.
import { RegistryError } from "./errors.ts";

const retryAfter = (secs: number) => ({ "Retry-After": String(secs) });

/** 405 DENIED: a blob delete refused because a manifest still references the blob. */
export function stillReferenced(detail: string): RegistryError {
  return new RegistryError("DENIED", detail, { status: 405 });
}

/**
 * 409 DENIED: a write refused because of what is already there (an immutable tag, a tag that
 * appeared while its delete was authorized, a held image keeping too many tags).
 */
export function rejectedWrite(detail: string): RegistryError {
  return new RegistryError("DENIED", detail, { status: 409 });
}

/**
 * 403 DENIED with `why` as its message as well as its detail: docker, podman and skopeo print an
 * error's message, not its detail, and the reason (a quota, say) is what the user needs.
 */
export function deniedWithReason(why: string): RegistryError {
  return new RegistryError("DENIED", why, { message: why });
}

/** 413 MANIFEST_INVALID: a manifest body over `global.max_manifest_size`. */
export function manifestTooLarge(max: number): RegistryError {
  return new RegistryError("MANIFEST_INVALID", `manifest exceeds ${max} bytes`, { status: 413 });
}

/** 409 BLOB_UPLOAD_INVALID: another writer changed the upload session under this request. */
export function uploadConflict(detail: string): RegistryError {
  return new RegistryError("BLOB_UPLOAD_INVALID", detail, { status: 409 });
}

/**
 * 404 UNSUPPORTED: an extension endpoint that has nothing to show for this object (an index where
 * an image is needed, a layer that cannot be listed, a file with no details, images too large to
 * compare).
 */
export function notApplicable(detail: string): RegistryError {
  return new RegistryError("UNSUPPORTED", detail, { status: 404 });
}

/** 400 UNSUPPORTED with Allow: a method the path does not serve (SPEC pairs UNSUPPORTED, 400). */
export function methodUnsupported(detail: string, allow: string[]): RegistryError {
  return new RegistryError("UNSUPPORTED", detail, { headers: { Allow: allow.join(", ") } });
}

/** 405 UNSUPPORTED with Allow: the one method refusal SPEC names a 405 for (POST /token). */
export function methodNotAllowed(detail: string, allow: string[]): RegistryError {
  return new RegistryError("UNSUPPORTED", detail, {
    status: 405,
    headers: { Allow: allow.join(", ") },
  });
}

/** 416 SIZE_INVALID with `Content-Range: bytes *\/size`: a range past the end of `size` bytes. */
export function rangeNotSatisfiable(size: number): RegistryError {
  return new RegistryError("SIZE_INVALID", "range not satisfiable", {
    headers: { "Content-Range": `bytes */${size}` },
  });
}

/** 429 TOOMANYREQUESTS with Retry-After: one such operation runs at a time and one is running. */
export function tooManyRequests(detail: string, retryAfterSecs: number): RegistryError {
  return new RegistryError("TOOMANYREQUESTS", detail, { headers: retryAfter(retryAfterSecs) });
}

/**
 * 503 PROVIDER_UNAVAILABLE with Retry-After: something the request needs (a store, the KV, an
 * upstream, a webhook, a sandbox) cannot serve it now; `detail` names it and the cause.
 */
export function unavailable(detail: string, retryAfterSecs: number): RegistryError {
  return new RegistryError("PROVIDER_UNAVAILABLE", detail, { headers: retryAfter(retryAfterSecs) });
}

/** 502 PROVIDER_UNAVAILABLE: an upstream refused or answered with something unusable. */
export function upstreamFailed(detail: string): RegistryError {
  return new RegistryError("PROVIDER_UNAVAILABLE", detail, { status: 502 });
}

/**
 * 503 INTERNAL_ERROR with Retry-After: the registry could not settle the request (what it judged
 * kept changing underneath) and another try will likely succeed.
 */
export function unsettled(detail: string, retryAfterSecs: number): RegistryError {
  return new RegistryError("INTERNAL_ERROR", detail, {
    status: 503,
    headers: retryAfter(retryAfterSecs),
  });
}

/** 503 RECLAMATION_IN_PROGRESS with Retry-After: a write racing the reclamation of `digest`. */
export function reclaiming(digest: string, retryAfterSecs: number): RegistryError {
  return new RegistryError(
    "RECLAMATION_IN_PROGRESS",
    `${digest} is being reclaimed; retry shortly`,
    { headers: retryAfter(retryAfterSecs) },
  );
}
