// Scrub's side of image reports: the reports of manifests no namespace holds any more.
import type { BlobStore } from "../storage/mod.ts";
import type { ScanRecords } from "./scan_records.ts";

/**
 * Scrub's sweep of image reports (a ManifestRecordSweep): drops the report of every manifest no
 * namespace holds any more, with its files. A report written after the walk began (`since`)
 * may be a manifest pushed since, so it stays for the next scrub; each drop is guarded by the
 * versionstamp read, so a rescan landing meanwhile wins.
 */
export async function sweepReports(
  records: Pick<ScanRecords, "all" | "deleteIf">,
  store: BlobStore,
  dryRun: boolean,
  manifests: ReadonlySet<string>,
  since: number,
): Promise<number> {
  let dropped = 0;
  for await (const e of records.all()) {
    const digest = e.key[1] as string;
    if (manifests.has(digest) || e.value.scanned_at >= since) continue;
    dropped++;
    if (dryRun) continue;
    if (!(await records.deleteIf(e))) {
      dropped--;
      continue;
    }
    const [alg, hex] = digest.split(":");
    if (alg && hex && /^[a-z0-9]+$/.test(alg) && /^[a-f0-9]+$/.test(hex)) {
      await store.deleteDerived(`reports/${alg}/${hex}`);
    }
  }
  return dropped;
}
