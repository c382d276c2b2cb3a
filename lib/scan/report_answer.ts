// The answer behind `/v2/<ns>/_svc/vulnerabilities/<digest>`: an image's stored report (with
// whether it was checked against advisories, older reports included), or one summary per
// platform of an index.
import type { ManifestMeta } from "../metadata/mod.ts";
import { notApplicable, parseManifest, RegistryError, truncate } from "../oci/mod.ts";
import { isImage } from "./scan_jobs.ts";
import type { AdvisoryMeta, AdvisoryStore } from "./advisory_store.ts";
import type { ImageReport } from "./image_report.ts";
import type { ScanRecord } from "./scan_records.ts";
import type { AdvisoryDownloadProblem, AdvisoryRefresh } from "./advisory_refresh.ts";
import type { Scanner } from "./scanner.ts";
import type { ScanDeps } from "./scanner.ts";
import { notCheckedReason } from "./formats.ts";

export interface PlatformSummary {
  digest: string;
  platform: { os?: string; architecture?: string; variant?: string } | null;
  status: "ready" | "scanning" | "not-an-image";
  /** a ready report matched against advisories; absent when it was */
  counts?: ScanRecord["counts"];
  /**
   * false (with `not_checked`, the reason, and no `counts`) for a ready report matched against
   * no advisory record: its zero counts would read as a clean image. Absent when checked.
   */
  vulnerabilities_checked?: false;
  not_checked?: string;
  scanned_at?: string;
  report: string;
}

/**
 * Why a stored report (by its record) was not matched against advisories, or null when it was:
 * the scanner's reasons (uncheckedReason), told from what the record keeps. A record written
 * before `checked` existed counts as checked when it names a snapshot that holds records.
 */
function recordNotChecked(rec: ScanRecord, adv: AdvisoryMeta | null): string | null {
  const records = rec.snapshot !== null && adv?.snapshot === rec.snapshot ? adv.records : null;
  if (rec.checked ?? (rec.snapshot !== null && records !== 0)) return null;
  if (rec.snapshot === null) return "no advisory data is loaded";
  if (records === 0) return "the advisory snapshot holds no records";
  const ecosystems = rec.ecosystems ?? [];
  return `the advisory snapshot holds no records for ${
    ecosystems.length > 0 ? ecosystems.join(", ") : "this image's packages"
  }`;
}

/** A stored report with `vulnerabilities_checked` (and `not_checked`), older reports included. */
function withCheck(report: ImageReport): ImageReport {
  const reason = notCheckedReason(report);
  return reason === null
    ? { ...report, vulnerabilities_checked: true }
    : { ...report, vulnerabilities_checked: false, not_checked: reason };
}

export type ReportAnswer =
  | { status: 202 }
  | {
    status: 200;
    kind: "image";
    /** with the last advisory download's failure, when it failed (advisory_refresh.ts) */
    report: ImageReport & { advisory_download?: AdvisoryDownloadProblem };
    refreshing: boolean;
  }
  | { status: 200; kind: "index"; digest: string; manifests: PlatformSummary[] };

/** What a report answer reads: records, bodies, the snapshot, and the stored record of an image. */
export interface AnswerDeps {
  revisions: Pick<ManifestMeta, "revision">;
  manifests: Pick<ScanDeps["manifests"], "body">;
  advisories: Pick<AdvisoryStore, "meta">;
  scanner: Pick<Scanner, "report">;
  refresh: Pick<AdvisoryRefresh, "problem">;
  /** the stored record, a scan queued when there is none or it is out of date */
  current: (ns: string, digest: string) => Promise<ScanRecord | null>;
}

/** The report of a manifest of `ns`: an image's, or one summary per platform of an index. */
export async function answerReport(
  d: AnswerDeps,
  ns: string,
  digest: string,
): Promise<ReportAnswer> {
  const rev = await d.revisions.revision(ns, digest);
  if (!rev) {
    throw new RegistryError("MANIFEST_UNKNOWN", `${truncate(ns)}@${truncate(digest)}`);
  }
  const parsed = parseManifest(await d.manifests.body(digest, rev), rev.mediaType);
  if (parsed.children.length > 0) {
    const manifests: PlatformSummary[] = [];
    const adv = await d.advisories.meta();
    for (const child of parsed.children.slice(0, 256)) {
      const link = `/v2/${ns}/_svc/vulnerabilities/${child.digest}`;
      const platform = child.platform
        ? {
          os: child.platform.os,
          architecture: child.platform.architecture,
          ...(child.platform.variant ? { variant: child.platform.variant } : {}),
        }
        : null;
      const childRev = await d.revisions.revision(ns, child.digest);
      let image = false;
      if (childRev) {
        try {
          image = isImage(
            parseManifest(
              await d.manifests.body(child.digest, childRev),
              childRev.mediaType,
            ),
          );
        } catch {
          image = false;
        }
      }
      if (!image) {
        manifests.push({ digest: child.digest, platform, status: "not-an-image", report: link });
        continue;
      }
      const rec = await d.current(ns, child.digest);
      if (!rec) {
        manifests.push({ digest: child.digest, platform, status: "scanning", report: link });
        continue;
      }
      const notChecked = recordNotChecked(rec, adv);
      manifests.push({
        digest: child.digest,
        platform,
        status: "ready",
        ...(notChecked === null
          ? { counts: rec.counts }
          : { vulnerabilities_checked: false, not_checked: notChecked }),
        scanned_at: new Date(rec.scanned_at).toISOString(),
        report: link,
      });
    }
    return { status: 200, kind: "index", digest, manifests };
  }
  if (!isImage(parsed)) {
    throw notApplicable(`${truncate(digest)} is not an image: no report`);
  }
  const rec = await d.current(ns, digest);
  if (!rec) return { status: 202 };
  const adv = await d.advisories.meta();
  const refreshing = (adv?.snapshot ?? null) !== rec.snapshot;
  const download = await d.refresh.problem();
  return {
    status: 200,
    kind: "image",
    report: {
      ...withCheck(await d.scanner.report(rec)),
      ...(download ? { advisory_download: download } : {}),
    },
    refreshing,
  };
}
