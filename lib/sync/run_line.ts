// How `main.ts sync` reports a finished run: one line, then its errors indented beneath it.
import type { SyncRunRecord } from "../metadata/mod.ts";

/** One line per finished run, as `main.ts sync` prints it. */
export function formatSyncRun(repository: string, n: number, r: SyncRunRecord): string {
  const verb = r.dry_run ? "would fetch" : "fetched";
  return `sync ${repository}#${n} (${
    r.namespaces.join(", ")
  }): ${r.outcome}; ${verb} ${r.tags_fetched} tag(s), ${r.tags_unchanged} unchanged, ${r.tags_pruned} pruned, ${r.blobs_fetched} blob(s) fetched${
    r.errors.length ? `; errors:\n  ${r.errors.join("\n  ")}` : ""
  }`;
}
