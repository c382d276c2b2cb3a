// Names, tags, digests and media types as the OCI distribution spec spells them.
import { RegistryError } from "./errors.ts";

// Path components per the distribution spec; the total is bounded so that a KV key holding a
// name stays far below Deno KV's 2 KiB key limit.
const NAME_RE =
  /^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*$/;
export const MAX_NAME_LENGTH = 255;
const TAG_RE = /^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$/;
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
// RFC 6838 type/subtype with optional +suffix; parameters are stripped before matching.
const MEDIA_TYPE_RE =
  /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}$/;

export type Algorithm = "sha256" | "sha512";
export const HEX_LENGTH: Record<Algorithm, number> = { sha256: 64, sha512: 128 };

export interface Digest {
  algorithm: Algorithm;
  hex: string;
  /** `<algorithm>:<hex>` */
  value: string;
}

export const isValidName = (s: string): boolean => s.length <= MAX_NAME_LENGTH && NAME_RE.test(s);
export const isValidTag = (s: string): boolean => TAG_RE.test(s);
export const isValidUuid = (s: string): boolean => UUID_RE.test(s);
export const isAlgorithm = (s: string): s is Algorithm => s === "sha256" || s === "sha512";

export function isMediaType(s: string): boolean {
  return MEDIA_TYPE_RE.test(s);
}

/** The media type without parameters (`; charset=...`), lower-cased as RFC 6838 compares them. */
export function bareMediaType(s: string): string {
  return s.split(";")[0].trim().toLowerCase();
}

export function parseDigest(s: string): Digest | null {
  const i = s.indexOf(":");
  if (i < 0) return null;
  const algorithm = s.slice(0, i);
  const hex = s.slice(i + 1);
  if (!isAlgorithm(algorithm)) return null;
  if (hex.length !== HEX_LENGTH[algorithm] || !/^[a-f0-9]+$/.test(hex)) return null;
  return { algorithm, hex, value: s };
}

export function requireDigest(s: string | null | undefined, what = "digest"): Digest {
  const d = s == null ? null : parseDigest(s);
  if (!d) {
    throw new RegistryError("DIGEST_INVALID", `invalid ${what}: ${truncate(s ?? "(missing)")}`);
  }
  return d;
}

export function requireName(s: string): string {
  if (!isValidName(s)) {
    throw new RegistryError("NAME_INVALID", `invalid repository name: ${truncate(s)}`);
  }
  return s;
}

/** User strings echoed in error details are cut so an error body never balloons. */
export function truncate(s: string, max = 128): string {
  return s.length > max ? s.slice(0, max) + "…" : s;
}
