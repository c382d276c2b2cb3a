// Which replication jobs a write causes, planned into the write's own commit so an acknowledged
// write never loses its job: a tag created or moved, an untagged revision pushed, a tag or a
// revision deleted (deletes carry the event's time: the source's when it was replicated).
import type { Config } from "../config/mod.ts";
import type { JobQueues, JobSpec } from "../jobs/mod.ts";
import type { PlannedMutation } from "../kv/mod.ts";
import type {
  EffectSubscriber,
  Outcome,
  SubscriberScope,
  WriteFact,
  WriteIntent,
} from "../effects/mod.ts";
import { deleteDigestJob, deleteTagJob, downstreamsOf, pushDigestJob, pushTagJob } from "./jobs.ts";

export class ReplicationEffects implements EffectSubscriber {
  constructor(private readonly cfg: Config, private readonly jobs: JobQueues) {}

  begin(intent: WriteIntent): SubscriberScope | null {
    if (
      intent.kind !== "manifest-push" && intent.kind !== "tag-delete" &&
      intent.kind !== "manifest-delete" && intent.kind !== "image-release"
    ) return null;
    const ns = intent.ns;
    if (downstreamsOf(this.cfg, ns).length === 0) return null;
    const q = this.jobs.queue("replication");
    // Read per fact: a config reload between attempts is seen, as before.
    const each = (job: (downstream: string) => JobSpec) =>
      downstreamsOf(this.cfg, ns).flatMap((d) => q.plan(job(d.name)));
    const planFor = (fact: WriteFact): PlannedMutation[] => {
      switch (intent.kind) {
        case "manifest-push":
          if (fact.kind === "tag-changed") return each((d) => pushTagJob(d, ns, fact.tag));
          // A held image (issue 34) goes nowhere until it is released.
          if (fact.kind === "revision-added" && !fact.held && intent.tags.length === 0) {
            return each((d) => pushDigestJob(d, ns, fact.digest));
          }
          return [];
        case "image-release":
          // Released: its tags now, or the revision itself when it was pushed by digest.
          if (fact.kind === "tag-changed") return each((d) => pushTagJob(d, ns, fact.tag));
          if (fact.kind === "image-released" && fact.tags.length === 0) {
            return each((d) => pushDigestJob(d, ns, fact.digest));
          }
          return [];
        case "tag-delete":
          if (fact.kind !== "tag-deleted") return [];
          return each((d) => deleteTagJob(d, ns, fact.tag, intent.at));
        case "manifest-delete": {
          if (fact.kind !== "revision-removed") return [];
          const id = crypto.randomUUID();
          return each((d) => deleteDigestJob(d, ns, fact.digest, intent.at, id));
        }
      }
    };
    return {
      mutationsFor: planFor,
      committed(outcome: Outcome): void {
        // Counts nothing (as before), wakes this process's replication workers.
        if (outcome.landed.length > 0) q.committed(0);
      },
    };
  }
}
