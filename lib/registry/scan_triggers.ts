// The scan jobs a push causes (`[scan] on_push`): one `scan-image` job per new platform image
// manifest of a hosted repository whose layers are indexed on push, in the push's own commit (lock key = the digest: the report
// is shared by every namespace holding the image). Indexes get no job: their report is made of
// their platforms' reports.
import type { Config } from "../config/schema.ts";
import { repositoryOf } from "../config/repositories.ts";
import type { ParsedManifest } from "../oci/manifest.ts";
import type { JobQueues } from "../jobs/mod.ts";
import type { PlannedMutation } from "../metadata/mod.ts";
import { indexesOnPush, tarLayers } from "./index_triggers.ts";

export const SCAN_KIND = "scan-image";

export function scanImageJob(digest: string, namespace: string) {
  return { kind: SCAN_KIND, payload: { digest, namespace }, lockKey: digest };
}

/** A platform image: a config and at least one filesystem layer. */
export function isImage(parsed: ParsedManifest): boolean {
  return parsed.children.length === 0 && tarLayers(parsed).length > 0;
}

export class ScanTriggers {
  constructor(private readonly cfg: Config, private readonly jobs: JobQueues) {}

  plan(ns: string, digest: string, parsed: ParsedManifest): PlannedMutation[] {
    if (!this.cfg.scan.onPush || !isImage(parsed)) return [];
    if (repositoryOf(this.cfg, ns).upstreams?.length) return [];
    // A scan indexes the layers it reads: where the index is told not to run on push, neither
    // does the scan (the first report request starts both).
    if (!indexesOnPush(this.cfg, ns)) return [];
    return this.jobs.queue("scan").plan(scanImageJob(digest, ns));
  }

  committed(planned: PlannedMutation[]): void {
    if (planned.length) this.jobs.queue("scan").committed(1);
  }
}
