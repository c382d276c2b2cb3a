// How many upload sessions are recorded, for the metrics gauge: read at scrape time.
import { K } from "../kv/mod.ts";

/** Scrapes stop counting here, so a flood of abandoned sessions cannot make /metrics slow
 * (10k keys list in ~30 ms); the gauge then reads as the cap. */
export const UPLOAD_CENSUS_CAP = 10_000;

export async function countUploadSessions(kv: Deno.Kv, cap = UPLOAD_CENSUS_CAP): Promise<number> {
  let n = 0;
  for await (const _ of kv.list({ prefix: K.uploadsAll() }, { limit: cap, batchSize: 1000 })) n++;
  return n;
}
