// The scrubber every process runs (`main.ts scrub`, serve's schedule): the registry's own pass
// plus what other folders derived from the bytes it reclaims.
import type { Config } from "../config/mod.ts";
import { sweepPullHistory } from "../metadata/mod.ts";
import type { BlobStore } from "../storage/mod.ts";
import { formatSummary, Scrubber } from "../registry/mod.ts";
import { forgetLayerIndex, IndexRecords } from "../index/mod.ts";
import { ScanRecords, sweepReports } from "../scan/mod.ts";
import { AuditTrail } from "../audit/mod.ts";

/**
 * A scrubber that also applies pull-history retention and drops what was derived from reclaimed
 * bytes (layer index, file-search keys, image report); `holder` as in Scrubber.
 */
export function scrubberFor(
  s: { cfg: Config; kv: Deno.Kv; store: BlobStore },
  holder?: string,
): Scrubber {
  const { cfg, kv, store } = s;
  const audit = new AuditTrail(kv, cfg);
  const indexRecords = new IndexRecords(kv);
  const scanRecords = new ScanRecords(kv);
  return new Scrubber(cfg, kv, store, (dryRun) => sweepPullHistory(kv, cfg, { dryRun }), holder)
    .onReclaim((d) => forgetLayerIndex(indexRecords, store, d))
    .onManifestRecords((dryRun, live, since) =>
      sweepReports(scanRecords, store, dryRun, live, since)
    )
    .onFinished(async (r) => {
      const old = await audit.sweep(r.dryRun);
      const dropped = `${r.dryRun ? "would drop" : "dropped"} ${old.dropped} audit record(s)`;
      await audit.record({ action: "scrub.run", detail: `${formatSummary(r)}; ${dropped}` });
    });
}
