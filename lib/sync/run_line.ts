// How `main.ts sync` reports a finished run: one line, then its errors indented beneath it.
import type { SyncRunRecord } from "./state.ts";

/**
 * One line per finished run, as `main.ts sync` prints it; `elapsedSecs`: how long this command
 * ran it (a resumed run started earlier).
 */
export function formatSyncRun(
  repository: string,
  n: number,
  r: SyncRunRecord,
  elapsedSecs?: number,
): string {
  const verb = r.dry_run ? "would fetch" : "fetched";
  const bytes = r.bytes_fetched ? ` (${mib(r.bytes_fetched)})` : "";
  const took = elapsedSecs === undefined ? "" : ` in ${elapsedSecs.toFixed(1)} s`;
  return `sync ${repository}#${n} (${
    r.namespaces.join(", ")
  }): ${r.outcome}; ${verb} ${r.tags_fetched} tag(s), ${r.tags_unchanged} unchanged, ${r.tags_pruned} pruned, ${r.blobs_fetched} blob(s) fetched${bytes}${took}${
    r.errors.length ? `; errors:\n  ${r.errors.join("\n  ")}` : ""
  }`;
}

function mib(n: number): string {
  return n < 1 << 20 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / (1 << 20)).toFixed(1)} MiB`;
}
