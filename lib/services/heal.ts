// Work that failed for a machine reason (a sandbox that could not start or was killed from
// outside, a store that failed: docs/operations.md, "Machine failures"), queued again once the
// machine may be fixed: when a process that runs index or scan jobs starts, and on the one
// periodic timer after this process saw such a failure. Each pass is bounded (HEAL_LIMIT layers
// and reports), and a layer, report or job healed MAX_HEALS times is left to `reindex`, `scan`
// or a request (lib/index/layer_heal.ts, lib/scan/report_heal.ts).
import type { QueueName } from "../config/mod.ts";
import { periodic } from "../jobs/mod.ts";
import type { LayerIndex } from "../index/mod.ts";
import type { Reports } from "../scan/mod.ts";
import { log } from "../log.ts";

/** What a heal pass works with: the services' layer index and reports. */
export interface HealServices {
  layers: Pick<LayerIndex, "heal" | "machineFailures">;
  reports: Pick<Reports, "heal" | "scanner">;
}

/** Layers, and apart reports, one pass queues at most. */
export const HEAL_LIMIT = 100;
/** How often a process looks whether it saw machine failures since its last pass. */
const HEAL_EVERY_MS = 10 * 60 * 1000;

/**
 * Starts healing for the queues this process drains (nothing without `index` or `scan`): one
 * pass now, in the background, then one per HEAL_EVERY_MS in which a job of this process failed
 * for a machine reason, or the last pass left older reports to read. Returns the stop, which
 * waits for a pass under way.
 */
export function startHealing(s: HealServices, drained: QueueName[]): () => Promise<void> {
  const index = drained.includes("index");
  const scan = drained.includes("scan");
  if (!index && !scan) return () => Promise.resolve();
  const failures = () =>
    (index ? s.layers.machineFailures : 0) + (scan ? s.reports.scanner.machineFailures : 0);
  let seen = -1;
  let more = false;
  let running: Promise<void> = Promise.resolve();
  const stop = periodic("heal", HEAL_EVERY_MS, (signal) => {
    const now = failures();
    if (now === seen && !more) return Promise.resolve();
    seen = now;
    return running = pass(s, { index, scan }, signal).then((left) => {
      more = left;
    });
  }, { immediate: true, unref: true, jitter: 0.1 });
  return async () => {
    stop();
    await running.catch(() => {});
  };
}

/** One pass; true when it left older reports to read (another pass has work). */
async function pass(
  s: HealServices,
  what: { index: boolean; scan: boolean },
  signal: AbortSignal,
): Promise<boolean> {
  const opts = { limit: HEAL_LIMIT, signal };
  const layers = what.index ? await s.layers.heal(opts) : null;
  const reports = what.scan ? await s.reports.heal(opts) : null;
  const fields = {
    ...(layers ? { layers: layers.layers, index_jobs: layers.jobs } : {}),
    ...(reports ? { reports: reports.reports, scan_jobs: reports.jobs } : {}),
  };
  if (Object.values(fields).some((n) => n > 0)) {
    log.info("heal: queued again what failed for a machine reason", fields);
  }
  const exhausted = (layers?.exhausted ?? 0) + (reports?.exhausted ?? 0);
  if (exhausted > 0) {
    log.warn("heal: left alone what kept failing for a machine reason (reindex, scan)", {
      layers: layers?.exhausted ?? 0,
      reports: reports?.exhausted ?? 0,
    });
  }
  return reports?.more ?? false;
}
