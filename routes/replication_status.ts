// GET /v2/_svc/replication/status (issue 24 part 3): per downstream and per scheduled sync, what
// lib/replication reports. No query parameters: any is refused (404, as extension listings do).
import { replicationStatus } from "../lib/replication/mod.ts";
import { syncStatus } from "../lib/sync/mod.ts";
import { jsonResponse } from "./request.ts";
import type { RequestScope } from "./scope.ts";

export async function replicationStatusHandler(
  { req, query, registry: reg, headers: extra, head }: RequestScope,
): Promise<Response> {
  await req.body?.cancel();
  query.only([]);
  // Scheduled pull syncs' figures are lib/sync's (`syncs` in the body).
  const syncs = async () => (await syncStatus(reg.cfg, reg.kv)).map((s) => ({ ...s }));
  const body = await replicationStatus(reg.cfg, reg.kv, reg.jobs, syncs);
  return jsonResponse(body, extra, head);
}
