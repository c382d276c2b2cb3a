// GET /v2/_svc/replication/status (issue 24 part 3): per downstream and per scheduled sync, what
// lib/replication reports. No query parameters: any is refused (404, as extension listings do).
import type { Registry } from "../lib/registry/mod.ts";
import { RegistryError, truncate } from "../lib/oci/mod.ts";
import { replicationStatus } from "../lib/replication/mod.ts";
import { syncStatus } from "../lib/sync/mod.ts";
import { jsonResponse } from "./request.ts";

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
  // Scheduled pull syncs' figures are lib/sync's (`syncs` in the body).
  const syncs = async () => (await syncStatus(reg.cfg, reg.kv)).map((s) => ({ ...s }));
  const body = await replicationStatus(reg.cfg, reg.kv, reg.jobs, syncs);
  return jsonResponse(body, extra, req.method === "HEAD");
}
