// The `scan-image` job: one per platform image manifest (lock key = the digest: the report is
// shared by every namespace holding the image). Indexes get no job: their report is made of
// their platforms' reports.
import type { ParsedManifest } from "../oci/mod.ts";
import { tarLayers } from "../index/mod.ts";

export const SCAN_KIND = "scan-image";

export function scanImageJob(digest: string, namespace: string) {
  return { kind: SCAN_KIND, payload: { digest, namespace }, lockKey: digest };
}

/** A platform image: a config and at least one filesystem layer. */
export function isImage(parsed: ParsedManifest): boolean {
  return parsed.children.length === 0 && tarLayers(parsed).length > 0;
}
