// The layer index jobs a write causes: one `index-layer` job per tar layer of a new revision
// (pushed, or fetched by a pull-through repository), in the commit that adds the revision. Past
// INDEX_JOBS_IN_COMMIT layers the rest are queued once that commit landed. A layer this process
// queued within RECENT_MS is not queued again: a burst of manifests sharing layers (the tags of
// one build, images on one base) queues each layer once, not once per manifest (issue 25: 500
// manifest PUTs naming one layer ran 500 index jobs beside them, −15% PUTs/s). Its job is durable
// in KV from that commit on; one that fails has its own retries, so skipping a repeat loses
// nothing a repeat would have added.
import type { Config } from "../config/mod.ts";
import type { JobQueues } from "../jobs/mod.ts";
import type { PlannedMutation } from "../kv/mod.ts";
import type {
  EffectSubscriber,
  Outcome,
  SubscriberScope,
  WriteFact,
  WriteIntent,
} from "../effects/mod.ts";
import { INDEX_JOBS_IN_COMMIT, indexesOnPush, indexLayerJob, tarLayers } from "./layer_jobs.ts";

/** How long a queued layer is not queued again by this process. */
export const RECENT_MS = 60_000;
/** Layers remembered; the oldest is forgotten first. */
const RECENT_MAX = 10_000;

export class IndexEffects implements EffectSubscriber {
  /** layer digest → when this process's commit queuing its index job landed */
  private readonly recent = new Map<string, number>();

  constructor(
    private readonly cfg: Config,
    private readonly jobs: JobQueues,
    private readonly now: () => number = Date.now,
  ) {}

  private queuedLately(digest: string): boolean {
    const at = this.recent.get(digest);
    return at !== undefined && this.now() - at < RECENT_MS;
  }

  private remember(digests: readonly string[]): void {
    const at = this.now();
    for (const d of digests) {
      this.recent.delete(d);
      this.recent.set(d, at);
    }
    while (this.recent.size > RECENT_MAX) this.recent.delete(this.recent.keys().next().value!);
  }

  begin(intent: WriteIntent): SubscriberScope | null {
    if (intent.kind !== "manifest-push" && intent.kind !== "manifest-fetch") return null;
    if (!indexesOnPush(this.cfg, intent.ns)) return null;
    const q = this.jobs.queue("index");
    let planned: { mutations: PlannedMutation[]; after: string[]; layers: string[] } | null = null;
    return {
      mutationsFor: (fact: WriteFact): PlannedMutation[] => {
        if (fact.kind !== "revision-added") return [];
        // Planned once: every attempt of the commit carries the same job records.
        if (!planned) {
          const layers = tarLayers(fact.parsed).filter((d) => !this.queuedLately(d));
          planned = {
            layers,
            mutations: layers.slice(0, INDEX_JOBS_IN_COMMIT).flatMap((d) =>
              q.plan(indexLayerJob(d))
            ),
            after: layers.slice(INDEX_JOBS_IN_COMMIT),
          };
        }
        return planned.mutations;
      },
      committed: async (outcome: Outcome): Promise<void> => {
        if (outcome.landed.length === 0 || !planned) return;
        this.remember(planned.layers.slice(0, INDEX_JOBS_IN_COMMIT));
        q.committed(0);
        for (const d of planned.after) {
          await q.enqueue(indexLayerJob(d)).then(() => this.remember([d]), () => {});
        }
      },
    };
  }
}
