// The registry-wide file index (docs/api.md#file-search): for every file of every indexed layer,
// three KV keys that lead from what a user knows to the layer holding it: the content's sha256,
// the exact path, the basename. Written by the index job after a layer's listing (batched
// commits inside KV's limits); a search expands each hit to the namespaces, manifests and tags
// that hold the layer *now* (blob ownership and manifest references), so a deleted manifest or a
// reclaimed layer drops out of the answers at once.
import type { IndexRecord, LayerReader } from "./layer_store.ts";
import { BlobMeta, ManifestMeta } from "../metadata/mod.ts";

export type SearchField = "sha256" | "path" | "name";
const PREFIX: Record<SearchField, string> = { sha256: "fsha", path: "fpath", name: "fname" };
export const FILE_INDEX_VERSION = 1;
export const fileIndexDoneKey = (layer: string): Deno.KvKey => ["fidxdone", layer];

/** A path longer than this is not searchable (KV keys stop at 2 KiB). */
const MAX_PATH_KEY = 1024;
const BATCH = 300;

function basename(p: string): string {
  return p.slice(p.lastIndexOf("/") + 1);
}

/** Writes the file index of one indexed layer; returns how many files it covers. */
export async function writeFileIndex(
  kv: Deno.Kv,
  reader: LayerReader,
  layer: string,
  rec: IndexRecord,
  signal?: AbortSignal,
): Promise<number> {
  const done = await kv.get<{ version: number }>(fileIndexDoneKey(layer));
  if (done.value && done.value.version >= FILE_INDEX_VERSION) return 0;
  let op = kv.atomic();
  let n = 0;
  let files = 0;
  const flush = async () => {
    if (n === 0) return;
    await op.commit();
    op = kv.atomic();
    n = 0;
  };
  for await (const e of reader.entries(rec)) {
    signal?.throwIfAborted();
    if (e.kind !== "file" && e.kind !== "symlink" && e.kind !== "hardlink") continue;
    if (new TextEncoder().encode(e.path).length > MAX_PATH_KEY) continue;
    const v = { size: e.size, kind: e.kind };
    for (const k of entryKeys(layer, e)) {
      op.set(k, v);
      n++;
    }
    files++;
    if (n >= BATCH) await flush();
  }
  await flush();
  await kv.set(fileIndexDoneKey(layer), { version: FILE_INDEX_VERSION, files });
  return files;
}

export interface SearchHit {
  namespace: string;
  manifest: string;
  tags: string[];
  layer: string;
  path: string;
  size: number;
}

export interface SearchPage {
  results: SearchHit[];
  /** cursor for the next page, absent on the last */
  next?: string;
}

/**
 * One page of hits for `value` in `field`, each (layer, path) expanded to the manifests that
 * hold the layer in namespaces `visible` admits. `n` bounds the (layer, path) hits read per page.
 */
export async function searchFiles(
  kv: Deno.Kv,
  field: SearchField,
  value: string,
  n: number,
  cursor: string | undefined,
  visible: (ns: string, layer: string) => Promise<boolean>,
): Promise<SearchPage> {
  const blobs = new BlobMeta(kv);
  const manifests = new ManifestMeta(kv);
  const it = kv.list<{ size: number }>(
    { prefix: [PREFIX[field], value] },
    // One more than a page: a next cursor only when there is more.
    { limit: n + 1, cursor, batchSize: Math.min(n + 1, 500) },
  );
  const results: SearchHit[] = [];
  let count = 0;
  let atN: string | undefined;
  let more = false;
  for await (const e of it) {
    if (count === n) {
      more = true;
      break;
    }
    count++;
    if (count === n) atN = it.cursor;
    const layer = e.key[2] as string;
    const path = field === "path" ? value : e.key[3] as string;
    for (const ns of await blobs.owners(layer, 100)) {
      if (!(await visible(ns, layer))) continue;
      for (const manifest of await manifests.manifestsUsing(ns, layer, 100)) {
        results.push({
          namespace: ns,
          manifest,
          tags: await manifests.tagsOf(ns, manifest),
          layer,
          path,
          size: e.value.size,
        });
      }
    }
  }
  return more && atN ? { results, next: atN } : { results };
}

/** The file-index keys of one listed entry (what writeFileIndex sets, forgetLayer deletes). */
function entryKeys(layer: string, e: { path: string; content?: { sha256?: string } }): Deno.KvKey[] {
  const keys: Deno.KvKey[] = [
    [PREFIX.path, e.path, layer],
    [PREFIX.name, basename(e.path), layer, e.path],
  ];
  if (e.content?.sha256) keys.push([PREFIX.sha256, e.content.sha256, layer, e.path]);
  return keys;
}

/**
 * Removes a reclaimed layer from the file index and drops its listing (scrub calls this once
 * the layer's bytes are claimed for deletion and before they go, so a scrub killed half-way
 * finds the claim again and repeats it). Returns how many index keys were deleted.
 */
export async function forgetLayer(
  kv: Deno.Kv,
  reader: LayerReader,
  layer: string,
  rec: IndexRecord | null,
): Promise<number> {
  let deleted = 0;
  if (rec && rec.state !== "unsupported") {
    let op = kv.atomic();
    let n = 0;
    try {
      for await (const e of reader.entries(rec)) {
        if (e.kind !== "file" && e.kind !== "symlink" && e.kind !== "hardlink") continue;
        for (const k of entryKeys(layer, e)) {
          op.delete(k);
          n++;
        }
        if (n >= BATCH) {
          await op.commit();
          deleted += n;
          op = kv.atomic();
          n = 0;
        }
      }
    } catch {
      // An unreadable listing: its keys cannot be derived, and searches already drop hits on
      // layers no namespace owns.
    }
    if (n > 0) {
      await op.commit();
      deleted += n;
    }
  }
  await kv.delete(fileIndexDoneKey(layer));
  return deleted;
}
