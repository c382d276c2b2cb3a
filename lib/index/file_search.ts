// The registry-wide file index (docs/api.md#file-search): for every file of every indexed layer,
// three KV keys that lead from what a user knows to the layer holding it: the content's sha256,
// the exact path, the basename. Written by the index job after a layer's listing (batched
// commits inside KV's limits); a search expands each hit to the namespaces, manifests and tags
// that hold the layer *now* (blob ownership and manifest references), so a deleted manifest or a
// reclaimed layer drops out of the answers at once.
import type { IndexRecord, LayerReader } from "./layer_store.ts";
import { BlobMeta, KV_LIMITS, ManifestMeta } from "../metadata/mod.ts";

export type SearchField = "sha256" | "path" | "name";
const PREFIX: Record<SearchField, string> = { sha256: "fsha", path: "fpath", name: "fname" };
export const FILE_INDEX_VERSION = 1;
export const fileIndexDoneKey = (layer: string): Deno.KvKey => ["fidxdone", layer];

/** A path longer than this is not searchable (KV keys stop at 2 KiB). */
const MAX_PATH_KEY = 1024;
/**
 * Fills commits up to KV's limits for the file index's own keys. CommitBudget measures any key
 * and value, but its per-mutation encoding and V8 serialization tripled the time of a 10k-file
 * layer's index (1.8 s against 0.6 s of commits); here a key's size follows from its parts'
 * UTF-8 lengths (paths hold no NUL, which KV's key encoding would escape) and every value is
 * the same small object, bounded by VALUE_MAX.
 */
class FileIndexBudget {
  private mutations = 0;
  private keyBytes = 0;
  private totalBytes = 0;

  /** Counts an entry's keys (`setting`: with values) if they fit; false when they do not. */
  take(keys: Deno.KvKey[], setting: boolean): boolean {
    let k = 0;
    let t = 0;
    for (const key of keys) {
      const size = partsSize(key);
      k += setting ? size : 0;
      t += setting ? 2 * size + VALUE_MAX : size;
    }
    if (
      this.mutations + keys.length > KV_LIMITS.mutations ||
      this.keyBytes + k > KV_LIMITS.keyBytes || this.totalBytes + t > KV_LIMITS.totalBytes
    ) return false;
    this.mutations += keys.length;
    this.keyBytes += k;
    this.totalBytes += t;
    return true;
  }
}

/** `{size, kind}` serialized: a tag, two short keys, a double and a kind of ≤ 8 letters. */
const VALUE_MAX = 64;

function partsSize(key: Deno.KvKey): number {
  let n = 0;
  for (const p of key) n += 2 + (typeof p === "string" ? utf8Length(p) : 9);
  return n;
}

function utf8Length(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    // 2 bytes below U+0800, 3 above; a surrogate pair (4 bytes) counts 2 + 2 here
    n += c < 0x800 ? 1 : c >= 0xd800 && c <= 0xdfff ? 1 : 2;
  }
  return n;
}

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
  let budget = new FileIndexBudget();
  let n = 0;
  let files = 0;
  const flush = async () => {
    if (n === 0) return;
    await op.commit();
    op = kv.atomic();
    budget = new FileIndexBudget();
    n = 0;
  };
  for await (const e of reader.entries(rec)) {
    signal?.throwIfAborted();
    if (!searchable(e)) continue;
    const v = { size: e.size, kind: e.kind };
    const keys = entryKeys(layer, e);
    if (!budget.take(keys, true)) {
      await flush();
      budget.take(keys, true);
    }
    for (const k of keys) op.set(k, v);
    n += keys.length;
    files++;
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

/** Whether an entry is in the file index: files and links whose path fits a key. */
function searchable(e: { kind: string; path: string }): boolean {
  if (e.kind !== "file" && e.kind !== "symlink" && e.kind !== "hardlink") return false;
  return utf8Length(e.path) <= MAX_PATH_KEY;
}

/** The file-index keys of one listed entry (what writeFileIndex sets, forgetLayer deletes). */
function entryKeys(
  layer: string,
  e: { path: string; content?: { sha256?: string } },
): Deno.KvKey[] {
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
    let budget = new FileIndexBudget();
    let n = 0;
    try {
      for await (const e of reader.entries(rec)) {
        if (!searchable(e)) continue;
        const keys = entryKeys(layer, e);
        if (!budget.take(keys, false)) {
          await op.commit();
          deleted += n;
          op = kv.atomic();
          budget = new FileIndexBudget();
          n = 0;
          budget.take(keys, false);
        }
        for (const k of keys) op.delete(k);
        n += keys.length;
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
