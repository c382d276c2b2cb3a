// Pull history (SPEC §Pull history entry, §Pulls listing). A manifest GET writes one new
// time-ordered "live" key and raises the revision's last-pull time with an atomic max: a blind
// commit with no read, so the hot path never conflicts or retries. Scrub later folds live keys
// into chunk records and trims them to max_pulls / max_age_secs (always keeping the newest).
// Readers merge both into one timeline, newest first.
import type { Config } from "../config/mod.ts";
import {
  CommitBudget,
  commitInBatches,
  K,
  listAll,
  type PlannedMutation,
  type PullChunk,
  type PullEntry,
} from "../kv/mod.ts";

/** Longer client names are cut: a chunk of CHUNK_ENTRIES (UTF-16 in the worst case) stays under KV's 64 KiB value. */
export const CLIENT_MAX = 256;
const CHUNK_ENTRIES = 100;
const DELETE_BATCH = 500;

export interface PullRecord extends PullEntry {
  ns: string;
  /** the tag or digest the GET addressed */
  target: string;
  /** the revision it resolved to */
  digest: string;
}

export interface Retention {
  maxPulls: number;
  /** null: no age bound */
  maxAgeSecs: number | null;
}

export interface CompactResult {
  /** entries removed (would be, in a dry run) */
  dropped: number;
  /** live keys and chunk records read */
  scanned: number;
}

interface Item extends PullEntry {
  /** the live key, or the index of the chunk the entry sits in */
  key?: Deno.KvKey;
  chunk?: number;
}

export class PullMeta {
  constructor(private readonly kv: Deno.Kv) {}

  /** One pull of `target` (tag or digest); `digest` is the revision it resolved to. */
  record(ns: string, target: string, digest: string, client: string, at: number) {
    return this.recordMany([{ ns, target, digest, client, at }]);
  }

  /**
   * Pulls in one blind commit (group commit: the caller batches what arrived while the last
   * commit was in flight). Last-pull times are coalesced per revision before the atomic max.
   */
  async recordMany(pulls: PullRecord[]): Promise<void> {
    let i = 0;
    while (i < pulls.length) {
      // Long names make long keys: a commit takes as many pulls as KV's key budget allows
      // (with room for each one's last-pull max), not a fixed count.
      const op = this.kv.atomic();
      const budget = new CommitBudget();
      const newest = new Map<string, { ns: string; digest: string; at: number }>();
      const start = i;
      for (; i < pulls.length; i++) {
        const p = pulls[i];
        const key = K.pull(p.ns, p.target, p.at, crypto.randomUUID());
        const client = p.client.slice(0, CLIENT_MAX);
        const id = JSON.stringify([p.ns, p.digest]);
        const seen = newest.get(id);
        const maxKey = K.lastPull(p.ns, p.digest);
        const muts: PlannedMutation[] = [{ kind: "set", key, value: client }];
        // The revision's last-pull max is added below, once per revision: counted here.
        if (!seen) muts.push({ kind: "set", key: maxKey, value: new Deno.KvU64(0n) });
        if (!budget.take(muts)) break;
        op.set(key, client);
        if (!seen || seen.at < p.at) newest.set(id, p);
      }
      if (i === start) throw new Error("a pull record exceeds KV's commit limits");
      for (const p of newest.values()) op.max(K.lastPull(p.ns, p.digest), BigInt(p.at));
      if (!(await op.commit()).ok) throw new Error("pull record commit refused");
    }
  }

  /** Newest pull time of a revision (ms), or null. */
  async lastPulled(ns: string, digest: string): Promise<number | null> {
    const v = (await this.kv.get<Deno.KvU64>(K.lastPull(ns, digest))).value;
    return v ? Number(v.value) : null;
  }

  /** `n` entries after skipping `offset`, newest first; `more` when another entry follows. */
  async page(
    ns: string,
    target: string,
    offset: number,
    n: number,
  ): Promise<{ entries: PullEntry[]; more: boolean }> {
    const entries: PullEntry[] = [];
    let i = 0;
    for await (const e of this.timeline(ns, target)) {
      if (i++ < offset) continue;
      if (entries.length === n) return { entries, more: true };
      entries.push({ client: e.client, at: e.at });
    }
    return { entries, more: false };
  }

  /** Live and compacted entries of one target as one timeline, newest first. */
  private timeline(ns: string, target: string): AsyncGenerator<Item> {
    return mergeDesc(this.live(ns, target), this.compacted(ns, target));
  }

  private async *live(ns: string, target: string): AsyncGenerator<Item> {
    const it = this.kv.list<string>({ prefix: K.pullsOf(ns, target) }, {
      reverse: true,
      batchSize: 500,
    });
    for await (const e of it) yield { client: e.value, at: e.key[3] as number, key: e.key };
  }

  /**
   * Chunks are keyed by their newest entry, so walking them newest-key first and emitting an
   * entry only once no unread chunk could hold a newer one gives exact order even when chunks
   * overlap in time (a pull recorded late by a slow clock).
   */
  private async *compacted(ns: string, target: string): AsyncGenerator<Item> {
    const it = this.kv.list<PullChunk>({ prefix: K.pullChunksOf(ns, target) }, { reverse: true })[
      Symbol.asyncIterator
    ]();
    let pending: PullEntry[] = [];
    let next = await it.next();
    for (;;) {
      while (
        !next.done && (pending.length === 0 || (next.value.key[3] as number) >= pending[0].at)
      ) {
        pending = [...pending, ...next.value.value.entries].sort((a, b) => b.at - a.at);
        next = await it.next();
      }
      const e = pending.shift();
      if (!e) return;
      yield e;
    }
  }

  /**
   * Folds the live entries of one target into chunks and drops everything past the retention
   * bounds; the newest entry always stays. Each fold moves live keys into a new chunk in one
   * commit, so an entry is never lost or doubled. Run by scrub only (one at a time).
   */
  async compact(
    ns: string,
    target: string,
    keep: Retention,
    now = Date.now(),
    dryRun = false,
  ): Promise<CompactResult> {
    const cutoff = keep.maxAgeSecs === null ? -Infinity : now - keep.maxAgeSecs * 1000;
    const chunks = await listAll<PullChunk>(this.kv, { prefix: K.pullChunksOf(ns, target) });
    const res: CompactResult = { dropped: 0, scanned: chunks.length };
    const stored: Item[] = chunks.flatMap((c, chunk) =>
      c.value.entries.map((e) => ({ ...e, chunk }))
    ).sort((a, b) => b.at - a.at);
    const keptLive: Item[] = [];
    const keptInChunk = chunks.map(() => [] as PullEntry[]);
    let doomed: Deno.KvKey[] = [];
    let i = 0;
    for await (const e of mergeDesc(this.live(ns, target), fromArray(stored))) {
      if (e.key) res.scanned++;
      const kept = i++ === 0 || (i <= keep.maxPulls && e.at >= cutoff);
      if (kept && e.key) keptLive.push(e);
      else if (kept) keptInChunk[e.chunk!].push({ client: e.client, at: e.at });
      else {
        res.dropped++;
        if (e.key) doomed.push(e.key);
        if (doomed.length === DELETE_BATCH) doomed = await this.deleteAll(doomed, dryRun);
      }
    }
    await this.deleteAll(doomed, dryRun);
    if (dryRun) return res;
    for (let c = 0; c < chunks.length; c++) {
      const kept = keptInChunk[c];
      if (kept.length === chunks[c].value.entries.length) continue;
      const op = this.kv.atomic().check(chunks[c]);
      if (kept.length === 0) op.delete(chunks[c].key);
      else op.set(chunks[c].key, { entries: kept } satisfies PullChunk);
      await op.commit();
    }
    for (let b = 0; b < keptLive.length; b += CHUNK_ENTRIES) {
      const batch = keptLive.slice(b, b + CHUNK_ENTRIES);
      const entries = batch.map((e) => ({ client: e.client, at: e.at }));
      const op = this.kv.atomic().set(
        K.pullChunk(ns, target, entries[0].at, crypto.randomUUID()),
        { entries } satisfies PullChunk,
      );
      for (const e of batch) op.delete(e.key!);
      await op.commit();
    }
    return res;
  }

  private async deleteAll(keys: Deno.KvKey[], dryRun: boolean): Promise<Deno.KvKey[]> {
    if (dryRun || keys.length === 0) return [];
    await commitInBatches(this.kv, keys.map((key) => ({ kind: "delete", key })));
    return [];
  }

  /**
   * Every (namespace, target) holding live or compacted pulls, each once per prefix. A skip
   * scan: one bounded list per target, whatever the number of entries under it (`true` sorts
   * after every number, so it starts past the target's last entry).
   */
  async *targets(prefix: Deno.KvKey): AsyncGenerator<[string, string]> {
    let start: Deno.KvKey | null = null;
    for (;;) {
      const sel: Deno.KvListSelector = start ? { prefix, start } : { prefix };
      let key: Deno.KvKey | null = null;
      for await (const e of this.kv.list(sel, { limit: 1 })) key = e.key;
      if (!key) return;
      const ns = key[1] as string;
      const target = key[2] as string;
      yield [ns, target];
      start = [...prefix, ns, target, true];
    }
  }

  /** Drops last-pull times of revisions that no longer exist; versionstamp-guarded. */
  async dropOrphanLastPulls(dryRun: boolean): Promise<{ dropped: number; scanned: number }> {
    let dropped = 0;
    let scanned = 0;
    for await (const e of this.kv.list({ prefix: K.lastPullsAll() }, { batchSize: 500 })) {
      scanned++;
      const rev = await this.kv.get(K.rev(e.key[1] as string, e.key[2] as string));
      if (rev.versionstamp !== null) continue;
      dropped++;
      if (!dryRun) await this.kv.atomic().check(e).check(rev).delete(e.key).commit();
    }
    return { dropped, scanned };
  }
}

/**
 * Scrub's pull-history step: compacts every target under the configured retention and drops
 * last-pull times of deleted revisions. `dropped` counts pull entries only.
 */
export async function sweepPullHistory(
  kv: Deno.Kv,
  cfg: Config,
  opts: { dryRun?: boolean; now?: number } = {},
): Promise<{ targets: number; dropped: number; scanned: number }> {
  const meta = new PullMeta(kv);
  const keep = { maxPulls: cfg.global.maxPulls, maxAgeSecs: cfg.global.maxAgeSecs };
  const now = opts.now ?? Date.now();
  const dryRun = opts.dryRun ?? false;
  const done = new Set<string>();
  const out = { targets: 0, dropped: 0, scanned: 0 };
  for (const prefix of [K.pullsAll(), K.pullChunksAll()]) {
    for await (const [ns, target] of meta.targets(prefix)) {
      const id = JSON.stringify([ns, target]);
      if (done.has(id)) continue;
      done.add(id);
      const r = await meta.compact(ns, target, keep, now, dryRun);
      out.targets++;
      out.dropped += r.dropped;
      out.scanned += r.scanned;
    }
  }
  out.scanned += (await meta.dropOrphanLastPulls(dryRun)).scanned;
  return out;
}

async function* fromArray<T>(xs: T[]): AsyncGenerator<T> {
  yield* xs;
}

/** Merges two newest-first streams into one. */
async function* mergeDesc<T extends PullEntry>(
  a: AsyncGenerator<T>,
  b: AsyncGenerator<T>,
): AsyncGenerator<T> {
  let x = await a.next();
  let y = await b.next();
  try {
    while (!x.done || !y.done) {
      if (y.done || (!x.done && x.value.at >= y.value.at)) {
        yield x.value as T;
        x = await a.next();
      } else {
        yield y.value;
        y = await b.next();
      }
    }
  } finally {
    await a.return(undefined);
    await b.return(undefined);
  }
}
