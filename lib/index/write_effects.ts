// The layer index jobs a write causes: one `index-layer` job per tar layer of a new revision
// (pushed, or fetched by a pull-through repository), in the commit that adds the revision. Past
// INDEX_JOBS_IN_COMMIT layers the rest are queued once that commit landed.
import type { Config } from "../config/mod.ts";
import type { JobQueues } from "../jobs/mod.ts";
import type { PlannedMutation, WriteFact } from "../metadata/mod.ts";
import type { EffectSubscriber, Outcome, SubscriberScope, WriteIntent } from "../effects/mod.ts";
import { INDEX_JOBS_IN_COMMIT, indexesOnPush, indexLayerJob, tarLayers } from "./layer_jobs.ts";

export class IndexEffects implements EffectSubscriber {
  constructor(private readonly cfg: Config, private readonly jobs: JobQueues) {}

  begin(intent: WriteIntent): SubscriberScope | null {
    if (intent.kind !== "manifest-push" && intent.kind !== "manifest-fetch") return null;
    if (!indexesOnPush(this.cfg, intent.ns)) return null;
    const q = this.jobs.queue("index");
    let planned: { mutations: PlannedMutation[]; after: string[] } | null = null;
    return {
      mutationsFor(fact: WriteFact): PlannedMutation[] {
        if (fact.kind !== "revision-added") return [];
        // Planned once: every attempt of the commit carries the same job records.
        if (!planned) {
          const layers = tarLayers(fact.parsed);
          planned = {
            mutations: layers.slice(0, INDEX_JOBS_IN_COMMIT).flatMap((d) =>
              q.plan(indexLayerJob(d))
            ),
            after: layers.slice(INDEX_JOBS_IN_COMMIT),
          };
        }
        return planned.mutations;
      },
      async committed(outcome: Outcome): Promise<void> {
        if (outcome.landed.length === 0 || !planned) return;
        q.committed(0);
        for (const d of planned.after) {
          await q.enqueue(indexLayerJob(d)).catch(() => {});
        }
      },
    };
  }
}
