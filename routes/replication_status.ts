// GET /v2/_svc/replication/status (issue 24 part 3): per downstream and per scheduled sync, what
// lib/replication reports. No query parameters: any is refused (404, as extension listings do).
import type { Registry } from "../lib/registry/mod.ts";
import { RegistryError, truncate } from "../lib/oci/mod.ts";
import { replicationStatus, type SyncStatusSource } from "../lib/replication/mod.ts";
import { jsonResponse } from "./request.ts";

/** Scheduled pull syncs' figures: lib/sync's status plugs in here (`syncs` in the body). */
const syncStatus: SyncStatusSource = () => Promise.resolve([]);

export async function replicationStatusHandler(
  req: Request,
  url: URL,
  reg: Registry,
  extra: Headers,
): Promise<Response> {
  await req.body?.cancel();
  for (const name of url.searchParams.keys()) {
    throw new RegistryError("NAME_UNKNOWN", `unknown parameter ${truncate(name)}`);
  }
  const body = await replicationStatus(reg.cfg, reg.kv, reg.jobs, syncStatus);
  return jsonResponse(body, extra, req.method === "HEAD");
}
