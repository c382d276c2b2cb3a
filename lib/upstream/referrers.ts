// One page of an upstream's referrers API (an image index of descriptors) and its next page.
import {
  type Descriptor,
  isRegistryError,
  nextLinkTarget,
  OCI_INDEX,
  parseDescriptor,
} from "../oci/mod.ts";
import type { Exchange, Transport } from "./transport.ts";

export function referrersPage(t: Transport, bytes: Uint8Array, what: string): Descriptor[] {
  let doc: unknown;
  try {
    doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    throw t.error("invalid", `${what}: answer is not JSON`);
  }
  const d = doc as Record<string, unknown>;
  if (
    typeof doc !== "object" || doc === null || !Array.isArray(d.manifests) ||
    (d.mediaType !== undefined && d.mediaType !== OCI_INDEX)
  ) {
    throw t.error("invalid", `${what}: answer is not an image index`);
  }
  try {
    return d.manifests.map((m, i) => parseDescriptor(m, `manifests[${i}]`));
  } catch (e) {
    if (!isRegistryError(e)) throw e;
    throw t.error("invalid", `${what}: ${e.detail}`);
  }
}

/** The `rel="next"` page, on `origin` only: a page elsewhere would take our token along. */
export function nextPage(t: Transport, ex: Exchange, origin: string, what: string): URL | null {
  const target = nextLinkTarget(ex.response.headers.get("link"));
  if (target === null) return null;
  let next: URL;
  try {
    next = new URL(target, ex.url);
  } catch {
    throw t.error("invalid", `${what}: malformed Link header`);
  }
  if (next.origin !== origin) {
    throw t.error("invalid", `${what}: next page on another origin (${next.origin})`);
  }
  return next;
}
