// Opening the KV that holds all metadata, with the wrappers every process needs on it.
import { type KvWriteWatch, withBusyRetry } from "./kv_busy.ts";
import { strictIfRequested } from "./kv_limits.ts";

/**
 * Opens the KV file (or KV Connect URL) that holds all metadata. `report` hears whether each
 * write reached a local file (a server's /readyz and metrics).
 */
export async function openMetadata(
  path: string,
  report?: KvWriteWatch["report"],
): Promise<Deno.Kv> {
  if (!/^https?:\/\//.test(path)) {
    const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : ".";
    if (dir) await Deno.mkdir(dir, { recursive: true });
  }
  const kv = strictIfRequested(await Deno.openKv(path));
  // A remote KV (KV Connect) serialises writers itself; a local file needs the busy retry.
  return /^https?:\/\//.test(path) ? kv : withBusyRetry(kv, { path, report });
}
