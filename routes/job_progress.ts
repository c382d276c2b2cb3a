// GET /v2/_svc/jobs/progress?queue=Q (issue 37 item 5): the long runs whose work is that queue's
// (a reindex batch on `index`, a rescan batch on `scan`, sync runs on `cache`), newest first,
// each with done/total (lib/jobs/progress.ts). Gated by `list-jobs` with `queue` exposed to CEL,
// as the jobs listing is; `queue` defaults to `cache`. Any other parameter, a repeated or an
// unknown queue is 404 NAME_UNKNOWN, as the job listings answer a malformed query.
import { RegistryError, truncate } from "../lib/oci/mod.ts";
import { isQueueName } from "../lib/jobs/mod.ts";
import { jsonResponse } from "./request.ts";
import type { RequestScope } from "./scope.ts";

export async function jobProgressHandler(
  { req, query, services, headers: extra, head }: RequestScope,
): Promise<Response> {
  await req.body?.cancel();
  const p = query.refusing((detail) => new RegistryError("NAME_UNKNOWN", detail));
  p.only(["queue"]);
  const q = p.one("queue") ?? "cache";
  if (!isQueueName(q)) {
    throw new RegistryError(
      "NAME_UNKNOWN",
      `unknown queue ${truncate(q)} (queues: cache, replication, scan, index, events)`,
    );
  }
  return jsonResponse({ queue: q, runs: await services.jobRuns(q) }, extra, head);
}
