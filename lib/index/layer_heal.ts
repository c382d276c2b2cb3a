// The layer index's heal pass (machine_failure.ts): once the machine may be fixed (a process that
// runs index jobs starts, or one saw machine failures), the layers whose indexing could not run
// are queued again, older versions' `unsupported` records of a sandbox that could not start
// included, and so are the index jobs dead-lettered so. Bounded: `limit` layers a pass, and a
// layer (or job) healed MAX_HEALS times is left alone (`reindex`, or a request for its entries,
// still queues it).
import type { BlobMeta } from "../metadata/mod.ts";
import type { JobQueue } from "../jobs/mod.ts";
import { INDEX_KIND, indexLayerJob } from "./layer_jobs.ts";
import type { IndexRecord } from "./layer_store.ts";
import type { IndexRecords } from "./index_records.ts";
import {
  isMachineFailureText,
  machineFailure,
  MAX_HEALS,
  unavailableRecord,
} from "./machine_failure.ts";

/** Failed jobs a pass looks through for machine failures, newest last. */
const DEAD_LETTERS_SEEN = 10_000;
const PAGE = 200;

export interface HealResult {
  /** layers queued again */
  layers: number;
  /** dead-lettered jobs moved back to pending */
  jobs: number;
  /** layers left alone: healed MAX_HEALS times already */
  exhausted: number;
}

export interface HealOptions {
  /** at most this many layers (and, apart, jobs) a pass */
  limit: number;
  signal?: AbortSignal;
}

/**
 * Moves back to pending, at most `limit`, the failed `kind` jobs of `queue` whose last error is a
 * machine failure (each at most MAX_HEALS times in its life: JobQueue.healFailed).
 */
export async function healDeadLetters(
  queue: Pick<JobQueue, "listFailed" | "healFailed">,
  kind: string,
  opts: HealOptions,
): Promise<number> {
  let healed = 0;
  let after: string | null = null;
  for (let seen = 0; seen < DEAD_LETTERS_SEEN; seen += PAGE) {
    const page = await queue.listFailed(after, PAGE);
    for (const j of page.items) {
      if (healed >= opts.limit || opts.signal?.aborted) return healed;
      if (j.kind !== kind || !isMachineFailureText(j.last_error ?? "")) continue;
      if (await queue.healFailed(j.storage_key, MAX_HEALS) === "healed") healed++;
    }
    if (!page.next) break;
    after = page.next;
  }
  return healed;
}

export interface LayerHealDeps {
  records: Pick<IndexRecords, "all" | "replaceQueueing">;
  blobs: Pick<BlobMeta, "blob">;
  queue: Pick<JobQueue, "listFailed" | "healFailed" | "plan" | "committed">;
}

/** One heal pass over the index records and the `index` queue's dead letters. */
export async function healLayers(d: LayerHealDeps, opts: HealOptions): Promise<HealResult> {
  const out: HealResult = { layers: 0, jobs: 0, exhausted: 0 };
  out.jobs = await healDeadLetters(d.queue, INDEX_KIND, opts);
  for await (const e of d.records.all()) {
    if (out.layers >= opts.limit || opts.signal?.aborted) break;
    const cause = machineFailure(e.value);
    if (cause === null) continue;
    const heals = e.value.heals ?? 0;
    if (heals >= MAX_HEALS) {
      out.exhausted++;
      continue;
    }
    const digest = e.key[1];
    // A layer whose bytes are gone is scrub's to forget, not ours to index.
    if (typeof digest !== "string" || !(await d.blobs.blob(digest))) continue;
    // An older version's `unsupported` record becomes what it always was: `unavailable`.
    const rec: IndexRecord = {
      ...unavailableRecord(e.value, cause, e.value.indexedAt)!,
      heals: heals + 1,
    };
    // A record changed meanwhile was written by a run of its job: that run decides.
    if (!(await d.records.replaceQueueing(e, rec, d.queue.plan(indexLayerJob(digest))))) continue;
    d.queue.committed();
    out.layers++;
  }
  return out;
}
