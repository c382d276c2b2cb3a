// The registry-wide file index (docs/api.md#file-search): for every file of every indexed layer,
// four KV keys that lead from what a user knows to the layer holding it: the content's sha256,
// the exact path, the basename and the basename reversed (so a pattern's literal end, `*.sh`,
// is a range of keys as a literal start, `hello*`, is of the basename keys). Written by the index job after a layer's listing (batched
// commits inside KV's limits); a search expands each hit to the namespaces, manifests and tags
// that hold the layer *now* (blob ownership and manifest references), so a deleted manifest or a
// reclaimed layer drops out of the answers at once.
import { createHash } from "node:crypto";
import { type IndexRecord, type LayerReader, listed } from "./layer_store.ts";
import { type FileIndexFamily, K, KV_LIMITS } from "../kv/mod.ts";
import type { BlobMeta, ManifestMeta } from "../metadata/mod.ts";
import type { IndexRecords } from "./index_records.ts";
import { utf8Length } from "./utf8.ts";

export type SearchField = "sha256" | "path" | "name";
/**
 * 2: paths up to MAX_PATH bytes are entered (1 KiB before), a long one under its hash.
 * 3: the reversed basename keys. Keys of earlier versions are unchanged, so rewriting an older
 * layer only adds keys.
 */
export const FILE_INDEX_VERSION = 3;

/**
 * Paths longer than this (UTF-8 bytes; Linux's PATH_MAX) are not entered: a hit's path must fit
 * in the hit's value when it cannot in its key.
 */
export const MAX_PATH = 4096;
/**
 * Encoded bytes of a path or name kept as itself in a key; a longer one is keyed by its sha256
 * (bytes, a type no string key part can equal), which a search computes the same way. Every
 * key then stays far below KV's 2 KiB, whatever a pushed name holds (KV escapes each NUL of a
 * key part as two bytes: 1,000 NULs made a key too large to write).
 */
const INLINE_MAX = 1024;

/**
 * Encoded bytes of a string key part: UTF-8 (a lone surrogate is written as U+FFFD, 3 bytes),
 * each NUL escaped to 2, and a type byte and a terminator. Stops counting past `stop`.
 */
function stringPartSize(s: string, stop = Infinity): number {
  let n = 2;
  for (let i = 0; i < s.length && n <= stop; i++) {
    const c = s.charCodeAt(i);
    if (c === 0) n += 2;
    else if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4;
        i++;
      } else n += 3;
    } else n += 3;
  }
  return n;
}

function partSize(p: Deno.KvKeyPart): number {
  if (typeof p === "string") return stringPartSize(p);
  if (p instanceof Uint8Array) {
    let n = 2 + p.byteLength;
    for (const b of p) if (b === 0) n++;
    return n;
  }
  return 9; // KV's numbers; the file index keys hold none
}

function keySize(key: Deno.KvKey): number {
  let n = 0;
  for (const p of key) n += partSize(p);
  return n;
}

/** `s` itself when it fits INLINE_MAX encoded, else its sha256 as bytes. */
function keyPart(s: string): string | Uint8Array {
  return stringPartSize(s, INLINE_MAX + 2) <= INLINE_MAX + 2 ? s : hashPart(s);
}

function hashPart(s: string): Uint8Array {
  return new Uint8Array(createHash("sha256").update(s, "utf8").digest());
}

/** Whether a path or name query can match anything entered: a non-empty one of MAX_PATH. */
export function searchableLength(s: string): boolean {
  return s.length > 0 && utf8Length(s, MAX_PATH) <= MAX_PATH;
}

/** `{size, kind}` serialized: a tag, two short keys, a double and a kind of ≤ 8 letters. */
const VALUE_MAX = 64;

interface IndexValue {
  size: number;
  kind: string;
  /** the path, when the key holds its hash */
  path?: string;
}

interface Mutation {
  key: Deno.KvKey;
  value: IndexValue;
  /** bytes of the key, and a bound of the value's */
  keyBytes: number;
  valueBytes: number;
}

/**
 * Fills commits up to KV's limits for the file index's own keys. CommitBudget measures any key
 * and value, but its per-mutation encoding and V8 serialization tripled the time of a 10k-file
 * layer's index (1.8 s against 0.6 s of commits); here a key's size follows from its parts and
 * a value is the same small object (VALUE_MAX), with a path of at most MAX_PATH in a few.
 */
class FileIndexBudget {
  private mutations = 0;
  private keyBytes = 0;
  private totalBytes = 0;

  /** Counts an entry's mutations (`setting`: with values) if they fit; false when they do not. */
  take(muts: Mutation[], setting: boolean): boolean {
    let k = 0;
    let t = 0;
    for (const m of muts) {
      k += setting ? m.keyBytes : 0;
      t += setting ? 2 * m.keyBytes + m.valueBytes : m.keyBytes;
    }
    if (
      this.mutations + muts.length > KV_LIMITS.mutations ||
      this.keyBytes + k > KV_LIMITS.keyBytes || this.totalBytes + t > KV_LIMITS.totalBytes
    ) return false;
    this.mutations += muts.length;
    this.keyBytes += k;
    this.totalBytes += t;
    return true;
  }
}

function basename(p: string): string {
  return p.slice(p.lastIndexOf("/") + 1);
}

function reversed(s: string): string {
  return Array.from(s).reverse().join("");
}

/** Whether a layer's file index is of the current version (else `reindex` rewrites it). */
export async function fileIndexCurrent(
  records: Pick<IndexRecords, "fileIndexDone">,
  layer: string,
): Promise<boolean> {
  const done = await records.fileIndexDone(layer);
  return (done?.version ?? 0) >= FILE_INDEX_VERSION;
}

/** Writes the file index of one indexed layer; returns how many files it covers. */
export async function writeFileIndex(
  records: Pick<IndexRecords, "fileIndexDone" | "commitFileKeys" | "setFileIndexDone">,
  reader: LayerReader,
  layer: string,
  rec: IndexRecord,
  signal?: AbortSignal,
): Promise<number> {
  const done = await records.fileIndexDone(layer);
  if (done && done.version >= FILE_INDEX_VERSION) return 0;
  let batch: Mutation[] = [];
  let budget = new FileIndexBudget();
  let files = 0;
  const flush = async () => {
    if (batch.length === 0) return;
    await records.commitFileKeys(batch);
    batch = [];
    budget = new FileIndexBudget();
  };
  for await (const e of reader.entries(rec)) {
    signal?.throwIfAborted();
    if (!searchable(e)) continue;
    const muts = entryMutations(layer, e);
    if (!budget.take(muts, true)) {
      await flush();
      budget.take(muts, true);
    }
    batch.push(...muts);
    files++;
  }
  await flush();
  await records.setFileIndexDone(layer, { version: FILE_INDEX_VERSION, files });
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
 * Keys, and characters of their names, a pattern search reads per page at most, matching or
 * not: with the route's bound on a pattern's length a page's cost is bounded, whatever was pushed.
 */
export const PATTERN_SCAN_MAX = 5_000;
const PATTERN_SCAN_CHARS = 1_000_000;
/** UTF-8 bytes of a name pattern (a Linux basename is at most 255). */
export const MAX_NAME_PATTERN = 255;

export interface NamePattern {
  /** the literal start (before the first wildcard) or end (after the last), reversed */
  range: { prefix: string; reversed: boolean };
  matches: (name: string) => boolean;
}

/** Whether a name query is a pattern: `*` (any run) or `?` (one character) in it. */
export const isNamePattern = (v: string): boolean => /[*?]/.test(v);

/**
 * A basename pattern read from its longer literal end: `hello*` scans the names from `hello`,
 * `*.sh` the reversed names from `hs.`; null when neither end is literal (`*`, `*x*`), which
 * would have to read every name.
 */
export function parseNamePattern(v: string): NamePattern | null {
  const chars = Array.from(v);
  const first = chars.findIndex((c) => c === "*" || c === "?");
  const last = chars.findLastIndex((c) => c === "*" || c === "?");
  const start = chars.slice(0, first).join("");
  const end = chars.slice(last + 1).join("");
  if (!start && !end) return null;
  return {
    range: start.length >= end.length
      ? { prefix: start, reversed: false }
      : { prefix: reversed(end), reversed: true },
    matches: (name) => globMatch(chars, Array.from(name)),
  };
}

/**
 * `*` and `?` over code points, greedy with one backtrack point (the last `*`): at most
 * pattern × name steps, whatever the pattern, never a regex's exponential backtracking. Names
 * are at most MAX_PATH bytes and patterns are bounded by the route.
 */
function globMatch(p: string[], s: string[]): boolean {
  let i = 0, j = 0, star = -1, mark = 0;
  while (j < s.length) {
    if (i < p.length && (p[i] === "?" || (p[i] !== "*" && p[i] === s[j]))) {
      i++;
      j++;
    } else if (i < p.length && p[i] === "*") {
      star = i++;
      mark = j;
    } else if (star >= 0) {
      i = star + 1;
      j = ++mark;
    } else return false;
  }
  while (i < p.length && p[i] === "*") i++;
  return i === p.length;
}

/**
 * One page of hits for `value` in `field`, each (layer, path) expanded to the manifests that
 * hold the layer in namespaces `visible` admits. `n` bounds the (layer, path) hits read per page.
 * A name holding `*` or `?` is a pattern (parseNamePattern): its page ends after `n` hits or
 * PATTERN_SCAN_MAX keys read, and its `next` may lead to an empty page.
 */
/** What a file search reads: the file-search keys, then who holds each layer now. */
export interface FileSearchDeps {
  records: Pick<IndexRecords, "fileKeys">;
  blobs: Pick<BlobMeta, "owners">;
  manifests: Pick<ManifestMeta, "manifestsUsing" | "tagsOf">;
}

export async function searchFiles(
  deps: FileSearchDeps,
  field: SearchField,
  value: string,
  n: number,
  cursor: string | undefined,
  visible: (ns: string, layer: string) => Promise<boolean>,
): Promise<SearchPage> {
  const { records, blobs, manifests } = deps;
  const expand = async (layer: string, path: string, size: number, into: SearchHit[]) => {
    for (const ns of await blobs.owners(layer, 100)) {
      if (!(await visible(ns, layer))) continue;
      for (const manifest of await manifests.manifestsUsing(ns, layer, 100)) {
        into.push({
          namespace: ns,
          manifest,
          tags: await manifests.tagsOf(ns, manifest),
          layer,
          path,
          size,
        });
      }
    }
  };
  if (field === "name" && isNamePattern(value)) {
    const pattern = parseNamePattern(value);
    if (!pattern) throw new Error("a name pattern needs a literal start or end");
    return await searchPattern(records, pattern, n, cursor, expand);
  }
  const it = records.fileKeys<IndexValue>(
    { prefix: K.fileIndex(field, field === "sha256" ? value : keyPart(value)) },
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
    const inKey = e.key[3];
    const path = field === "path" ? value : typeof inKey === "string" ? inKey : e.value.path;
    if (typeof layer !== "string" || path === undefined) continue;
    await expand(layer, path, e.value.size, results);
  }
  return more && atN ? { results, next: atN } : { results };
}

/** The highest code point: every string that starts with a prefix sorts below prefix + this. */
const TOP = "\u{10FFFF}";

async function searchPattern(
  records: FileSearchDeps["records"],
  pattern: NamePattern,
  n: number,
  cursor: string | undefined,
  expand: (layer: string, path: string, size: number, into: SearchHit[]) => Promise<void>,
): Promise<SearchPage> {
  const family: FileIndexFamily = pattern.range.reversed ? "reversedName" : "name";
  const { prefix } = pattern.range;
  // Names keyed by their hash (over INLINE_MAX bytes) are byte parts, outside this string range:
  // a pattern never finds them (an exact name still does).
  const it = records.fileKeys<IndexValue>(
    { start: K.fileIndex(family, prefix), end: K.fileIndex(family, prefix + TOP) },
    { cursor, batchSize: 500 },
  );
  const results: SearchHit[] = [];
  let hits = 0;
  let scanned = 0;
  let chars = 0;
  for await (const e of it) {
    scanned++;
    const keyed = e.key[1];
    const layer = e.key[2];
    const inKey = e.key[3];
    if (typeof keyed === "string" && typeof layer === "string") {
      const name = pattern.range.reversed ? reversed(keyed) : keyed;
      chars += name.length;
      const path = typeof inKey === "string" ? inKey : e.value.path;
      if (path !== undefined && pattern.matches(name)) {
        hits++;
        await expand(layer, path, e.value.size, results);
      }
    }
    if (hits === n || scanned === PATTERN_SCAN_MAX || chars >= PATTERN_SCAN_CHARS) {
      return { results, next: it.cursor };
    }
  }
  return { results };
}

/** Whether an entry is in the file index: files and links whose path is at most MAX_PATH. */
function searchable(e: { kind: string; path: string }): boolean {
  if (e.kind !== "file" && e.kind !== "symlink" && e.kind !== "hardlink") return false;
  return searchableLength(e.path);
}

/**
 * The file-index keys of one listed entry (what writeFileIndex sets, forgetLayer deletes), with
 * their values. A key by name or digest ends with the path itself when the whole key fits KV's
 * limit (as version 1 wrote it), else with the path's hash, the path going in the value.
 */
function entryMutations(
  layer: string,
  e: { path: string; size: number; kind: string; content?: { sha256?: string } },
): Mutation[] {
  // KV writes a lone surrogate in a key as U+FFFD; a value would keep it.
  const path = e.path.isWellFormed() ? e.path : e.path.toWellFormed();
  const value: IndexValue = { size: e.size, kind: e.kind };
  const byPath = K.fileIndex("path", keyPart(path), layer);
  const out: Mutation[] = [{
    key: byPath,
    value,
    keyBytes: keySize(byPath),
    valueBytes: VALUE_MAX,
  }];
  const pathSize = stringPartSize(path);
  const ending = (head: Deno.KvKey): Mutation => {
    const headBytes = keySize(head);
    if (headBytes + pathSize <= KV_LIMITS.keyMax) {
      return {
        key: [...head, path],
        value,
        keyBytes: headBytes + pathSize,
        valueBytes: VALUE_MAX,
      };
    }
    const hashed = hashPart(path);
    return {
      key: [...head, hashed],
      value: { ...value, path: path },
      keyBytes: headBytes + partSize(hashed),
      // V8 may write the path two bytes a character
      valueBytes: VALUE_MAX + 16 + 2 * path.length,
    };
  };
  const name = basename(path);
  out.push(ending(K.fileIndex("name", keyPart(name), layer)));
  out.push(ending(K.fileIndex("reversedName", keyPart(reversed(name)), layer)));
  if (e.content?.sha256) out.push(ending(K.fileIndex("sha256", e.content.sha256, layer)));
  return out;
}

/**
 * Removes a reclaimed layer from the file index and drops its listing (scrub calls this once
 * the layer's bytes are claimed for deletion and before they go, so a scrub killed half-way
 * finds the claim again and repeats it). Returns how many index keys were deleted.
 */
export async function forgetLayer(
  records: Pick<IndexRecords, "commitFileKeys" | "deleteFileIndexDone">,
  reader: LayerReader,
  layer: string,
  rec: IndexRecord | null,
): Promise<number> {
  let deleted = 0;
  if (rec && listed(rec)) {
    let batch: { key: Deno.KvKey }[] = [];
    let budget = new FileIndexBudget();
    try {
      for await (const e of reader.entries(rec)) {
        if (!searchable(e)) continue;
        const keys = entryMutations(layer, e);
        if (!budget.take(keys, false)) {
          await records.commitFileKeys(batch);
          deleted += batch.length;
          batch = [];
          budget = new FileIndexBudget();
          budget.take(keys, false);
        }
        for (const k of keys) batch.push({ key: k.key });
      }
    } catch {
      // An unreadable listing: its keys cannot be derived, and searches already drop hits on
      // layers no namespace owns.
    }
    if (batch.length > 0) {
      await records.commitFileKeys(batch);
      deleted += batch.length;
    }
  }
  await records.deleteFileIndexDone(layer);
  return deleted;
}
