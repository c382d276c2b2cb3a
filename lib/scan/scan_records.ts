// The scan's own records in KV: each image's report pointer (`scanrep/<digest>` → ScanRecord,
// naming the report's derived file, its counts and the advisory snapshot it used). With
// advisory_store.ts (the advisory snapshot) it is the only file of lib/scan that holds the KV;
// the rest of the folder reads and writes reports through it, and anything outside lib/scan asks
// Reports (reports.ts).
import { addJobs, K, openMetadata, type PlannedMutation } from "../kv/mod.ts";
import type { Severity } from "./osv.ts";
import { AdvisoryStore } from "./advisory_store.ts";

export const scanKey = (digest: string): Deno.KvKey => K.scanReport(digest);

/** The KV pointer to a stored report. */
export interface ScanRecord {
  version: number;
  scanned_at: number;
  /** advisory snapshot used; null when none was loaded */
  snapshot: string | null;
  /** derived-file path of the report */
  file: string;
  counts: Record<Severity, number>;
  packages: number;
  os: string | null;
  /** osv.dev dumps this image's packages are looked up in (absent in older records) */
  ecosystems?: string[];
  /** ImageReport.vulnerabilities_checked (absent in older records: read as snapshot !== null) */
  checked?: boolean;
  /**
   * false: the report was built from parses that could not run (older versions stored such
   * reports: machine_stale.ts); true: it was not. Absent in older records until one is read.
   */
  sound?: boolean;
  /** how often a heal pass queued the rescan of a report that is not sound (report_heal.ts) */
  heals?: number;
}

export class ScanRecords {
  constructor(private readonly kv: Deno.Kv) {}

  /** The record of `digest`'s report, null when it has none. */
  async get(digest: string): Promise<ScanRecord | null> {
    return (await this.kv.get<ScanRecord>(scanKey(digest))).value;
  }

  /** The record with its versionstamp, for a write guarded by it (replaceIf, deleteIf). */
  read(digest: string): Promise<Deno.KvEntryMaybe<ScanRecord>> {
    return this.kv.get<ScanRecord>(scanKey(digest));
  }

  /** Every report's record, in digest order. */
  all(options: Deno.KvListOptions = {}): AsyncIterable<Deno.KvEntry<ScanRecord>> {
    return this.kv.list<ScanRecord>({ prefix: K.scanReportsAll() }, options);
  }

  /**
   * Writes `rec` over the record `seen` was read from, with `jobs` (the jobs and events the
   * write causes) in the same commit; false when the record changed since.
   */
  async replaceIf(
    seen: Deno.KvEntryMaybe<ScanRecord>,
    rec: ScanRecord,
    jobs: PlannedMutation[] = [],
  ): Promise<boolean> {
    const op = this.kv.atomic().check(seen).set(seen.key, rec);
    return (await addJobs(op, jobs).commit()).ok;
  }

  /** Drops the record `seen` was read from; false when it changed since (a rescan landed). */
  async deleteIf(seen: Deno.KvEntry<ScanRecord>): Promise<boolean> {
    return (await this.kv.atomic().check(seen).delete(seen.key).commit()).ok;
  }
}

/**
 * The scan's stores over the KV at `location`, opened for a one-shot command (`advisories`,
 * which builds no services) and closed once `f` is done.
 */
export async function withScanStores<T>(
  location: string,
  f: (s: { records: ScanRecords; advisories: AdvisoryStore }) => Promise<T>,
): Promise<T> {
  const kv = await openMetadata(location);
  try {
    return await f({ records: new ScanRecords(kv), advisories: new AdvisoryStore(kv) });
  } finally {
    kv.close();
  }
}
