// Storing a report: written to the slot of the two (a.json, b.json) its current record does not
// use, then the record pointed at it in one commit with the report's events.
import type { BlobStore } from "../storage/mod.ts";
import type { WriteFacts } from "../effects/mod.ts";
import type { ScanRecord, ScanRecords } from "./scan_records.ts";
import { imageEcosystems } from "./ecosystems.ts";
import { LANGUAGE_ECOSYSTEMS } from "./advisory_match.ts";
import { type ImageReport, SCAN_VERSION } from "./image_report.ts";

/** A report's record commit, retried past bookkeeping writes to the same record. */
const STORE_ATTEMPTS = 3;

/** Writes the report to the slot the current record does not use, then points at it. */
export async function storeReport(
  records: ScanRecords,
  files: BlobStore,
  ns: string,
  digest: string,
  report: ImageReport,
  effects: WriteFacts,
): Promise<void> {
  const cur = await records.read(digest);
  const [alg, hex] = digest.split(":");
  const dir = `reports/${alg}/${hex}`;
  const file = cur.value?.file === `${dir}/a.json` ? `${dir}/b.json` : `${dir}/a.json`;
  const bytes = new TextEncoder().encode(JSON.stringify(report));
  await files.writeDerived(file, ReadableStream.from([bytes]));
  // No report of parses that could not run is stored (run throws first).
  const rec: ScanRecord = {
    version: SCAN_VERSION,
    scanned_at: Date.parse(report.scanned_at),
    snapshot: report.advisories?.snapshot ?? null,
    file,
    counts: report.counts,
    packages: report.packages.length,
    checked: report.vulnerabilities_checked,
    os: report.os ? `${report.os.id} ${report.os.version_id ?? ""}`.trim() : null,
    ecosystems: imageEcosystems(
      report.os,
      report.packages.flatMap((p) => LANGUAGE_ECOSYSTEMS[p.type] ?? []),
    ),
    sound: true,
  };
  let seen = cur;
  for (let attempt = 0; attempt < STORE_ATTEMPTS; attempt++) {
    effects.attempt();
    const jobs = effects.mutationsFor({ kind: "report-stored", ns, digest });
    if (await records.replaceIf(seen, rec, jobs)) return effects.landed();
    // A lost race means another run of this job stored its report (and its event) first,
    // unless only the record's bookkeeping changed (its `sound` mark, a heal count): the same
    // report file.
    const now = await records.read(digest);
    if (now.value?.file !== cur.value?.file) return;
    seen = now;
  }
}
