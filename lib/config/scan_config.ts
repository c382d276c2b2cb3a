// `[scan]`: the advisory database (where it lives, where it is downloaded from, how often) and
// the scan's limits and sandbox.
import { type Config, isEcosystemName } from "./schema.ts";
import { isUrl, type Reader } from "./config_reader.ts";
import { readSandbox, SANDBOX_KEYS } from "./shared_tables.ts";
import type { Table } from "./table_readers.ts";

/** `[scan]` into `cfg.scan`. */
export function readScan(r: Reader, sc: Table, cfg: Config): void {
  r.only(sc, "scan", [
    "advisories_dir",
    "on_push",
    "reload_interval_secs",
    "advisories_url",
    "refresh_interval_secs",
    "advisories_ecosystems",
    "advisories_ca_bundle",
    "max_database_size",
    "max_packages",
    "max_diff_entries",
    ...SANDBOX_KEYS,
  ]);
  cfg.scan.advisoriesDir = r.str(sc, "advisories_dir", "scan") ?? null;
  cfg.scan.onPush = r.bool(sc, "on_push", "scan") ?? cfg.scan.onPush;
  cfg.scan.reloadIntervalSecs = r.int(sc, "reload_interval_secs", "scan", 1) ??
    cfg.scan.reloadIntervalSecs;
  cfg.scan.advisoriesUrl = r.str(sc, "advisories_url", "scan") ?? cfg.scan.advisoriesUrl;
  if (cfg.scan.advisoriesUrl !== "" && !isUrl(cfg.scan.advisoriesUrl)) {
    r.fail("scan.advisories_url", 'must be an http(s) URL, or "" to never download');
  }
  cfg.scan.refreshIntervalSecs = r.int(sc, "refresh_interval_secs", "scan", 1) ?? null;
  if (cfg.scan.refreshIntervalSecs !== null && !cfg.scan.advisoriesDir) {
    r.fail("scan.refresh_interval_secs", "needs scan.advisories_dir (where the files go)");
  }
  cfg.scan.advisoriesEcosystems = r.strings(sc, "advisories_ecosystems", "scan") ?? [];
  for (const [i, e] of cfg.scan.advisoriesEcosystems.entries()) {
    if (!isEcosystemName(e)) {
      r.fail(`scan.advisories_ecosystems[${i}]`, `"${e}" is not an OSV ecosystem name`);
    }
  }
  cfg.scan.advisoriesCaBundle = r.str(sc, "advisories_ca_bundle", "scan") ?? null;
  cfg.scan.maxDatabaseSize = r.int(sc, "max_database_size", "scan", 1) ??
    cfg.scan.maxDatabaseSize;
  cfg.scan.maxPackages = r.int(sc, "max_packages", "scan", 1) ?? cfg.scan.maxPackages;
  cfg.scan.maxDiffEntries = r.int(sc, "max_diff_entries", "scan", 1) ?? cfg.scan.maxDiffEntries;
  readSandbox(r, sc, "scan", cfg.scan);
}
