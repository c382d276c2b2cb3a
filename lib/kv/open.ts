// Opening the KV that holds all metadata, with the wrappers every process needs on it.
import { type KvWriteWatch, withBusyRetry } from "./kv_busy.ts";
import { strictIfRequested } from "./kv_limits.ts";
import { K } from "./keys.ts";

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
  if (/^https?:\/\//.test(path)) return kv;
  return withBusyRetry(kv, { path, report, reopen: () => openWritable(path) });
}

/**
 * The KV file opened again, only if it can be written now: SQLite opens a file it may not write
 * read-only, silently, and refuses even a commit that only checks ("Can not write to a
 * read-only database").
 */
async function openWritable(path: string): Promise<Deno.Kv> {
  const raw = await Deno.openKv(path);
  try {
    // A commit that only checks a key is absent writes nothing.
    await raw.atomic().check({ key: K.writeProbe(), versionstamp: null }).commit();
  } catch (e) {
    raw.close();
    throw e;
  }
  return strictIfRequested(raw);
}
