// Image reports (packages, advisories, config secrets): the public surface of lib/scan. Reports
// (reports.ts) runs the `scan` queue's jobs, watches the advisory directory and answers
// `/v2/<ns>/_svc/vulnerabilities/…` and the image diff; the Scanner (scanner.ts) writes one
// image's report; advisory_*.ts load and download the advisory snapshot; scrub sweeps the reports
// of deleted manifests (report_sweep.ts); ScanEffects queues scans on a push (write_effects.ts).
// The scan's own records are ScanRecords' (scan_records.ts: each image's report pointer) and
// AdvisoryStore's (the snapshot), which the composition root builds over the KV; a layer's index
// record is the layer index's, asked through its LayerIndexReader.
export { LOAD_KIND, Reports, type ReportsDeps } from "./reports.ts";
export { type PlatformSummary, type ReportAnswer } from "./report_answer.ts";
export { DIFF_DEFAULT_N, DIFF_MAX_N } from "./report_diff.ts";
export { sweepReports } from "./report_sweep.ts";
export { type ReportHealResult } from "./report_heal.ts";
export { type AdvisoryMeta, AdvisoryStore } from "./advisory_store.ts";
export { isImage, SCAN_KIND, scanImageJob } from "./scan_jobs.ts";
export { ScanEffects } from "./write_effects.ts";
export {
  ecosystemUrl,
  type FetchOutcome,
  type FetchState,
  readFetchState,
  ZIP_NAME,
} from "./advisory_fetch.ts";
export {
  type AdvisoriesArgs,
  advisoriesCommand,
  type CommandResult,
  formatSnapshot,
} from "./advisory_commands.ts";
export {
  FETCH_KIND,
  fetchInto,
  type FetchRun,
  neededEcosystems,
  readFetchRun,
} from "./advisory_refresh.ts";
export { type ScanDeps } from "./scanner.ts";
export { type Finding, type ImageReport, SCAN_VERSION } from "./image_report.ts";
export { SEVERITY_RANK } from "./advisory_match.ts";
export { type ConfigSecret } from "./config_secrets.ts";
export { type ScanRecord, ScanRecords } from "./scan_records.ts";
export { SEVERITIES, type Severity } from "./osv.ts";
export { reportCsv, reportCycloneDx, reportSpdx } from "./formats.ts";

export { type DiffEntry, type DiffSide, type ImageDiff } from "./image_diff.ts";
