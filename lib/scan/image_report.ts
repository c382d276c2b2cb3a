// An image's report as it is stored (a derived file of the blob store) and served: its packages,
// the advisory findings against them, the config's secrets, and whether advisories were checked.
import type { Severity } from "./osv.ts";
import type { OsInfo } from "./os_release.ts";
import type { Package } from "./package_dbs.ts";
import type { ConfigSecret } from "./config_secrets.ts";

export const SCAN_VERSION = 1;

export interface Finding {
  id: string;
  aliases: string[];
  severity: Severity;
  package: string;
  installed: string;
  fixed: string | null;
  summary: string;
  references: string[];
  /** the package name the advisory is published under (a source package for Debian) */
  advisory_package: string;
  ecosystem: string;
}

export interface ImageReport {
  digest: string;
  scanned_at: string;
  platform: { os: string; architecture: string; variant?: string } | null;
  os: OsInfo | null;
  advisories: { snapshot: string; loaded_at: string; records: number } | null;
  /**
   * Whether the packages were matched against advisory records at all. False (with
   * `not_checked`, the reason) when no snapshot is loaded, the snapshot holds no records, or
   * it holds none for any of the image's ecosystems: an empty `findings` then means "not
   * checked", never "clean". Absent in reports written before it existed (read as `advisories
   * !== null`).
   */
  vulnerabilities_checked: boolean;
  not_checked?: string;
  note?: string;
  counts: Record<Severity, number>;
  packages: Package[];
  findings: Finding[];
  config_secrets: ConfigSecret[];
  warnings: string[];
}
