// The scan jobs a push causes (`[scan] on_push`): one `scan-image` job per new platform image
// manifest of a hosted repository whose layers are indexed on push, in the push's own commit.
import { type Config, repositoryOf } from "../config/mod.ts";
import type { JobQueues } from "../jobs/mod.ts";
import type { PlannedMutation } from "../kv/mod.ts";
import type {
  EffectSubscriber,
  Outcome,
  SubscriberScope,
  WriteFact,
  WriteIntent,
} from "../effects/mod.ts";
import { indexesOnPush } from "../index/mod.ts";
import { isImage, scanImageJob } from "./scan_jobs.ts";

export class ScanEffects implements EffectSubscriber {
  constructor(private readonly cfg: Config, private readonly jobs: JobQueues) {}

  begin(intent: WriteIntent): SubscriberScope | null {
    if (intent.kind !== "manifest-push" || !this.cfg.scan.onPush) return null;
    const ns = intent.ns;
    if (repositoryOf(this.cfg, ns).upstreams?.length) return null;
    // A scan indexes the layers it reads: where the index is told not to run on push, neither
    // does the scan (the first report request starts both).
    if (!indexesOnPush(this.cfg, ns)) return null;
    const q = this.jobs.queue("scan");
    let planned: PlannedMutation[] | null = null;
    return {
      mutationsFor(fact: WriteFact): PlannedMutation[] {
        if (fact.kind !== "revision-added" || !isImage(fact.parsed)) return [];
        planned ??= q.plan(scanImageJob(fact.digest, ns));
        return planned;
      },
      committed(outcome: Outcome): void {
        if (outcome.landed.length > 0) q.committed(1);
      },
    };
  }
}
