// The reports' heal pass (machine_stale.ts): once the machine may be fixed (a process that runs
// scans starts, or one saw machine failures), the reports older versions built from parses that
// could not run are rescanned, and the scans dead-lettered for a machine reason are queued again.
// Bounded: `limit` reports a pass, and a report (or job) healed MAX_HEALS times is left alone
// (`scan`, or a request for the report, still queues it).
import type { DigestHolds, ManifestMeta } from "../metadata/mod.ts";
import type { JobQueues } from "../jobs/mod.ts";
import { healDeadLetters, type HealOptions, MAX_HEALS } from "../index/mod.ts";
import { SCAN_KIND, scanImageJob } from "./scan_jobs.ts";
import type { Scanner } from "./scanner.ts";
import type { ScanRecords } from "./scan_records.ts";

/** Digests a namespace is asked about at once (KV's getMany takes at most 10 keys). */
const GET_MANY = 10;
/**
 * Older records whose report a pass reads to tell (Scanner.sound): the first pass after an
 * upgrade would otherwise read every report at once; the rest wait for the next pass.
 */
const READS_PER_PASS = 1000;

export interface ReportHealResult {
  /** reports whose rescan was queued */
  reports: number;
  /** dead-lettered scans moved back to pending */
  jobs: number;
  /** reports left alone: healed MAX_HEALS times already */
  exhausted: number;
  /** older reports are left to read: another pass has work */
  more: boolean;
}

export interface ReportHealDeps {
  records: Pick<ScanRecords, "all" | "read" | "replaceIf">;
  /** the catalog's pages, looked through for a namespace holding each report's image */
  revisions: Pick<ManifestMeta, "catalog">;
  holds: Pick<DigestHolds, "revisions">;
  scanner: Pick<Scanner, "sound">;
  jobs: Pick<JobQueues, "queue">;
}

/** One heal pass over the stored reports and the `scan` queue's dead letters. */
export async function healReports(
  d: ReportHealDeps,
  opts: HealOptions,
): Promise<ReportHealResult> {
  const out: ReportHealResult = { reports: 0, jobs: 0, exhausted: 0, more: false };
  out.jobs = await healDeadLetters(d.jobs.queue("scan"), SCAN_KIND, opts);
  const due: string[] = [];
  let reads = 0;
  for await (const e of d.records.all({ batchSize: 500 })) {
    if (due.length >= opts.limit || opts.signal?.aborted) break;
    if (e.value.sound === undefined && ++reads > READS_PER_PASS) {
      out.more = true;
      break;
    }
    if (await d.scanner.sound(e)) continue;
    if ((e.value.heals ?? 0) >= MAX_HEALS) out.exhausted++;
    else if (typeof e.key[1] === "string") due.push(e.key[1]);
  }
  if (due.length === 0) return out;
  const queue = d.jobs.queue("scan");
  for (const [digest, ns] of await holders(d, due, opts.signal)) {
    const cur = await d.records.read(digest);
    // Rescanned meanwhile: its new record is sound.
    if (cur.value?.sound !== false) continue;
    const healed = { ...cur.value, heals: (cur.value.heals ?? 0) + 1 };
    if (!(await d.records.replaceIf(cur, healed, queue.plan(scanImageJob(digest, ns))))) continue;
    queue.committed();
    out.reports++;
  }
  return out;
}

/**
 * A namespace holding a revision of each of `digests` (a scan job names one; the report is
 * shared): a walk of the catalog, paid only when a pass has reports to heal.
 */
async function holders(
  d: Pick<ReportHealDeps, "revisions" | "holds">,
  digests: string[],
  signal?: AbortSignal,
): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  const left = new Set(digests);
  let last: string | null = null;
  for (;;) {
    const page = await d.revisions.catalog(200, last, () => true);
    for (const ns of page.names) {
      if (signal?.aborted) return found;
      const wanted = [...left];
      for (let i = 0; i < wanted.length; i += GET_MANY) {
        const part = wanted.slice(i, i + GET_MANY);
        const held = await d.holds.revisions(ns, part);
        held.forEach((has, j) => {
          if (!has) return;
          found.set(part[j], ns);
          left.delete(part[j]);
        });
      }
      if (left.size === 0) return found;
    }
    if (!page.more) return found;
    last = page.names[page.names.length - 1];
  }
}
