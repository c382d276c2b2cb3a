// GET /v2/_svc/replication/status (issue 24 part 3): per downstream and per scheduled sync, what
// lib/replication reports. No query parameters: any is refused (404, as extension listings do).
import { jsonResponse } from "./request.ts";
import type { RequestScope } from "./scope.ts";

export async function replicationStatusHandler(
  { req, query, services, headers: extra, head }: RequestScope,
): Promise<Response> {
  await req.body?.cancel();
  query.only([]);
  const body = await services.replicationStatus();
  return jsonResponse(body, extra, head);
}
