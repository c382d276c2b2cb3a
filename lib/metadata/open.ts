// Opening the KV that holds all metadata, with the wrappers every process needs on it.
import { withBusyRetry } from "./kv_busy.ts";
import { strictIfRequested } from "./kv_limits.ts";

/** Opens the KV file (or KV Connect URL) that holds all metadata. */
export async function openMetadata(path: string): Promise<Deno.Kv> {
  if (!/^https?:\/\//.test(path)) {
    const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : ".";
    if (dir) await Deno.mkdir(dir, { recursive: true });
  }
  const kv = strictIfRequested(await Deno.openKv(path));
  // A remote KV (KV Connect) serialises writers itself; a local file needs the busy retry.
  return /^https?:\/\//.test(path) ? kv : withBusyRetry(kv);
}
