// The one place that decides what a write causes: replication, layer indexing, scans, and events
// with their audit records, in this order (the order of their mutations in a commit). Every
// Registry that serves writes gets it through RegistryOptions.effects.
import type { Config } from "../config/mod.ts";
import type { JobQueues } from "../jobs/mod.ts";
import { composeEffects, type WriteEffects } from "../effects/mod.ts";
import { EventEffects, type Events } from "../events/mod.ts";
import { ReplicationEffects } from "../replication/mod.ts";
import { IndexEffects } from "../index/mod.ts";
import { ScanEffects } from "../scan/mod.ts";

export function writeEffectsFor(cfg: Config, jobs: JobQueues, events: Events): WriteEffects {
  return composeEffects([
    new ReplicationEffects(cfg, jobs),
    new IndexEffects(cfg, jobs),
    new ScanEffects(cfg, jobs),
    new EventEffects(events),
  ]);
}

/** RegistryOptions.effects for `cfg`: every subscriber, over the registry's queues and events. */
export function allWriteEffects(
  cfg: Config,
): (parts: { jobs: JobQueues; events: Events }) => WriteEffects {
  return ({ jobs, events }) => writeEffectsFor(cfg, jobs, events);
}
