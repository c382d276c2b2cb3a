// The job administration endpoints (SPEC §Extension endpoints, Job administration 1–3):
// parse the query strictly, call the queue, write JSON. A malformed query is 404 on the GET
// listings and 400 on the retry/delete mutations, never defaulted.
import type { Action } from "./actions.ts";
import type { Registry } from "../lib/registry/mod.ts";
import { RegistryError, truncate } from "../lib/oci/mod.ts";
import { isQueueName, isStorageKey, type JobQueue, NotAJobError } from "../lib/jobs/mod.ts";
import { jsonResponse } from "./request.ts";
import type { Query } from "./query.ts";
import type { RequestScope } from "./scope.ts";

export const JOBS_DEFAULT_N = 100;
/** Larger pages are served at this size (with `next`), as the catalog does. */
export const JOBS_MAX_N = 1000;

const PARAMS = ["n", "after", "queue", "key"];

interface JobQuery {
  queue: JobQueue;
  n: number;
  after: string | null;
  key: string | null;
}

/** The `queue` value CEL rules see: the named queue when valid, else the default. */
export function queueOf(query: Query): string {
  const q = query.first("queue");
  return q !== null && isQueueName(q) ? q : "cache";
}

function parse(query: Query, a: Action, reg: Registry): JobQuery {
  const listing = a.name === "list-jobs" || a.name === "list-failed-jobs";
  const bad = (detail: string) =>
    listing ? new RegistryError("NAME_UNKNOWN", detail) : new RegistryError("UNSUPPORTED", detail);
  const p = query.refusing(bad);
  p.atMostOnce(PARAMS);
  const q = p.one("queue") ?? "cache";
  if (!isQueueName(q)) {
    throw bad(`unknown queue ${truncate(q)} (queues: cache, replication, scan, index, events)`);
  }
  const n = p.count("n", JOBS_DEFAULT_N, { max: JOBS_MAX_N });
  const after = p.one("after");
  if (after !== null && !isStorageKey(after)) {
    throw bad(`after is not a job key: ${truncate(after)}`);
  }
  const key = p.one("key");
  if (!listing) {
    if (key === null) throw bad("key is required");
    if (!isStorageKey(key)) throw bad(`key is not a job key: ${truncate(key)}`);
  }
  return { queue: reg.jobs.queue(q), n, after, key };
}

export async function jobsHandler(
  { req, query, action: a, registry: reg, headers: extra, head }: RequestScope,
): Promise<Response> {
  await req.body?.cancel();
  const q = parse(query, a, reg);
  switch (a.name) {
    case "list-jobs": {
      const page = await q.queue.listPending(q.after, q.n);
      return jsonResponse(withNext({ jobs: page.items }, page.next), extra, head);
    }
    case "list-failed-jobs": {
      const page = await q.queue.listFailed(q.after, q.n);
      return jsonResponse(withNext({ failed: page.items }, page.next), extra, head);
    }
    default: {
      let done: boolean;
      try {
        done = a.name === "retry-job"
          ? await q.queue.retryFailed(q.key!)
          : a.resource === "failed"
          ? await q.queue.deleteFailed(q.key!)
          : await q.queue.deletePending(q.key!);
      } catch (e) {
        if (e instanceof NotAJobError) {
          throw new RegistryError("UNSUPPORTED", e.message);
        }
        throw e;
      }
      if (!done) {
        throw new RegistryError(
          "NAME_UNKNOWN",
          `no ${a.resource} job ${q.key} in queue ${q.queue.name}`,
        );
      }
      return new Response(null, { status: 204, headers: extra });
    }
  }
}

function withNext<T extends object>(body: T, next: string | undefined): T & { next?: string } {
  return next === undefined ? body : { ...body, next };
}
