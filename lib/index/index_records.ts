// The layer index's own records in KV, and the one file of lib/index that holds the KV: a layer's
// IndexRecord (`layeridx/<digest>`, the pointer to its listing) and the file-search keys
// (`fidx/…` per listed file, `fidxdone/<layer>` once a layer's are written). Everything else in
// the folder reads and writes them through this class; other folders ask the layer index
// (LayerIndexReader), never these keys.
import { addJobs, K, type PlannedMutation } from "../kv/mod.ts";
import { indexKey, type IndexRecord } from "./layer_store.ts";

/** What `fidxdone/<layer>` holds: the file index's version, and how many files it covers. */
export interface FileIndexDone {
  version: number;
  files?: number;
}

export const fileIndexDoneKey = (layer: string): Deno.KvKey => K.fileIndexDone(layer);

export class IndexRecords {
  constructor(private readonly kv: Deno.Kv) {}

  /** A layer's record, null when it was never indexed. */
  async get(digest: string): Promise<IndexRecord | null> {
    return (await this.kv.get<IndexRecord>(indexKey(digest))).value;
  }

  /** A layer's record with its versionstamp, for a write guarded by it (replaceIf). */
  read(digest: string): Promise<Deno.KvEntryMaybe<IndexRecord>> {
    return this.kv.get<IndexRecord>(indexKey(digest));
  }

  /** Writes `rec` unless the record changed since `seen` was read; false when it did. */
  async replaceIf(seen: Deno.KvEntryMaybe<IndexRecord>, rec: IndexRecord): Promise<boolean> {
    return (await this.kv.atomic().check(seen).set(seen.key, rec).commit()).ok;
  }

  /** Points the layer at `rec` (a finished run's: the last run wins). */
  async set(digest: string, rec: IndexRecord): Promise<void> {
    await this.kv.set(indexKey(digest), rec);
  }

  async delete(digest: string): Promise<void> {
    await this.kv.delete(indexKey(digest));
  }

  /** Every layer's record, in digest order (the heal pass walks them). */
  all(): AsyncIterable<Deno.KvEntry<IndexRecord>> {
    return this.kv.list<IndexRecord>({ prefix: K.layerIndexAll() }, { batchSize: 500 });
  }

  /**
   * `rec` over the record `seen` (from `all`) together with `jobs` (the layer's index job) in one
   * commit; false when the record changed meanwhile (a run of its job wrote it: that run decides).
   */
  async replaceQueueing(
    seen: Deno.KvEntry<IndexRecord>,
    rec: IndexRecord,
    jobs: PlannedMutation[],
  ): Promise<boolean> {
    const op = this.kv.atomic().check(seen).set(seen.key, rec);
    return (await addJobs(op, jobs).commit()).ok;
  }

  /** The layer's file-index mark: null until its file-search keys were written. */
  async fileIndexDone(layer: string): Promise<FileIndexDone | null> {
    return (await this.kv.get<FileIndexDone>(fileIndexDoneKey(layer))).value;
  }

  async setFileIndexDone(layer: string, done: FileIndexDone): Promise<void> {
    await this.kv.set(fileIndexDoneKey(layer), done);
  }

  async deleteFileIndexDone(layer: string): Promise<void> {
    await this.kv.delete(fileIndexDoneKey(layer));
  }

  /** One commit of file-search keys: sets (with a value) or deletes (without), within KV's limits. */
  async commitFileKeys(muts: { key: Deno.KvKey; value?: unknown }[]): Promise<void> {
    const op = this.kv.atomic();
    for (const m of muts) {
      if (m.value === undefined) op.delete(m.key);
      else op.set(m.key, m.value);
    }
    await op.commit();
  }

  /** File-search keys in `selector` (the iterator's cursor pages a search). */
  fileKeys<V>(selector: Deno.KvListSelector, options: Deno.KvListOptions): Deno.KvListIterator<V> {
    return this.kv.list<V>(selector, options);
  }
}
