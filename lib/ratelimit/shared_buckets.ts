// Token buckets shared by every process on one KV, at a bounded KV cost. Each process decides
// from its own view of a bucket, read from the KV when it is older than one sync interval, and
// settles what it took once per sync interval, ten buckets per atomic commit (the strictest
// backend's check limit), each commit checked against the versionstamps it last saw (a conflict
// reads and merges again). A request waits on the KV only for that read, and the reads are
// batched per process: stale buckets queue for a getMany of up to ten keys, at most
// READS_IN_FLIGHT of them running at once, so under load one read serves several identities
// (the window is one read's time) and at low load a read starts at once. A request whose
// buckets are fresh is decided synchronously, without a promise.
//
// Over-admission (docs/operations.md, "Rate limits"): processes that have not yet seen each
// other's takes each admit from the same tokens, so P processes can together admit up to
// P × (capacity + sync_interval × rate) in one interval where one process would admit
// capacity + sync_interval × rate. Every admitted take is charged at the next settle, so
// the excess is paid back: the identity is refused until its bucket has refilled past it.
// Batching the reads changes none of this: a stale bucket's request still waits for its read.
import { commitWithRetry, conflictPause, K } from "../kv/mod.ts";
import { type Bucket, merge, take, tokensLeft, type Verdict } from "./gcra.ts";

interface Entry {
  key: Deno.KvKey;
  /** this process's view of the bucket's TAT, its own takes included */
  tat: number;
  /** takes not yet settled with the KV */
  pending: number;
  periodMs: number;
  /** when this view last matched the KV (a read, or a settle whose check passed) */
  syncedAt: number;
  /** the KV's value and versionstamp as last read or written here (0/null: absent) */
  stored: number;
  versionstamp: string | null;
  /** set while a load from the KV runs */
  loading: Promise<void> | null;
}

export interface BucketRef {
  scope: string;
  cls: string;
  who: string;
  bucket: Bucket;
}

/** KV operations made, by kind (the bench divides them by requests). */
export interface KvCounts {
  gets: number;
  commits: number;
  conflicts: number;
}

/** Buckets this process remembers; idle full ones are dropped at each settle. */
const MAX_ENTRIES = 100_000;
const CHECKS_PER_COMMIT = 10;
/** Keys per getMany (the strictest backend's limit). */
const KEYS_PER_READ = 10;
/** Reads of stale buckets running at once per process; more stale buckets wait and share one. */
const READS_IN_FLIGHT = 2;
/** A settle retries a conflicting batch this often before leaving it to the next settle. */
const SETTLE_ATTEMPTS = 5;

/** Stale buckets read together in one getMany. */
interface ReadBatch {
  entries: Entry[];
  done: Promise<void>;
  resolve: () => void;
}

export class SharedBuckets {
  private readonly entries = new Map<string, Entry>();
  /** batches waiting for a read slot, oldest first; the last one may still be filling */
  private readonly batches: ReadBatch[] = [];
  private reads = 0;
  private readonly dirty = new Set<Entry>();
  private timer: ReturnType<typeof setTimeout> | null = null;
  private settling: Promise<void> | null = null;
  readonly kvCounts: KvCounts = { gets: 0, commits: 0, conflicts: 0 };

  constructor(
    private readonly kv: Deno.Kv,
    private readonly syncIntervalMs: () => number,
    private readonly onError: (e: unknown) => void = () => {},
    private readonly onKvOp: (op: keyof KvCounts) => void = () => {},
  ) {}

  private count(op: keyof KvCounts): void {
    this.kvCounts[op]++;
    this.onKvOp(op);
  }

  /** Takes one token from the bucket `scope/cls/who`, reading it first when stale. */
  async take(scope: string, cls: string, who: string, b: Bucket): Promise<Verdict> {
    await this.prepare([{ scope, cls, who, bucket: b }]);
    return this.takeNow(scope, cls, who, b);
  }

  /** Takes one token from this process's view as it is (after `prepare`). */
  takeNow(scope: string, cls: string, who: string, b: Bucket): Verdict {
    const e = this.entry(scope, cls, who, b);
    const v = take(b, e.tat, Date.now());
    if (v.ok) {
      e.tat = v.tat;
      e.pending++;
      e.periodMs = b.periodMs;
      this.dirty.add(e);
      this.schedule();
    }
    return v;
  }

  /** Tokens left without taking one (HEAD of a manifest), as of the last `prepare`. */
  peek(scope: string, cls: string, who: string, b: Bucket): number {
    const e = this.entries.get(id(scope, cls, who));
    return tokensLeft(b, e?.tat ?? 0, Date.now());
  }

  /** Settles now (tests, shutdown). */
  async flush(): Promise<void> {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    await this.settle();
  }

  /**
   * Queues the unseen or stale ones of these buckets for a batched read, so that the takes that
   * follow decide from a fresh view. Null when every view is fresh: the caller decides at once.
   */
  prepare(refs: BucketRef[]): Promise<void> | null {
    const now = Date.now();
    const interval = this.syncIntervalMs();
    // Allocated only when some bucket must wait: the fresh path stays allocation-free.
    let waits: Promise<void>[] | null = null;
    for (const r of refs) {
      const e = this.entry(r.scope, r.cls, r.who, r.bucket);
      // A view older than one sync interval is read again first: other processes' takes since
      // then count before this one (at most one read per bucket per interval).
      if (!e.loading && now - e.syncedAt > interval) this.enqueue(e);
      if (!e.loading) continue;
      waits ??= [];
      if (!waits.includes(e.loading)) waits.push(e.loading);
    }
    if (waits === null) return null;
    this.pump();
    return waits.length === 1 ? waits[0] : Promise.all(waits).then(() => {});
  }

  private enqueue(e: Entry): void {
    let b = this.batches.at(-1);
    if (!b || b.entries.length >= KEYS_PER_READ) {
      let resolve!: () => void;
      const done = new Promise<void>((r) => resolve = r);
      b = { entries: [], done, resolve };
      this.batches.push(b);
    }
    b.entries.push(e);
    e.loading = b.done;
  }

  /** Starts queued reads while a slot is free; a batch queued behind busy slots keeps filling. */
  private pump(): void {
    while (this.reads < READS_IN_FLIGHT && this.batches.length > 0) {
      const b = this.batches.shift()!;
      this.reads++;
      this.read(b.entries).finally(() => {
        this.reads--;
        b.resolve();
        this.pump();
      });
    }
  }

  private entry(scope: string, cls: string, who: string, b: Bucket): Entry {
    const k = id(scope, cls, who);
    let e = this.entries.get(k);
    if (!e) {
      if (this.entries.size >= MAX_ENTRIES) this.sweep();
      e = {
        key: K.rateLimit(scope, cls, who),
        tat: 0,
        pending: 0,
        periodMs: b.periodMs,
        syncedAt: 0,
        stored: 0,
        versionstamp: null,
        loading: null,
      };
      this.entries.set(k, e);
    }
    return e;
  }

  private async read(es: Entry[]): Promise<void> {
    try {
      this.count("gets");
      const got = await this.kv.getMany<number[]>(es.map((e) => e.key));
      es.forEach((e, i) => this.adopt(e, got[i]));
    } catch (err) {
      // The KV unreachable: decide from this process's view alone rather than fail requests.
      this.onError(err);
    } finally {
      // Also after a failure: a KV that is down is asked once per interval, not per request.
      const now = Date.now();
      for (const e of es) {
        e.syncedAt = now;
        e.loading = null;
      }
    }
  }

  private schedule(): void {
    if (this.timer !== null || this.settling) return;
    const timer = setTimeout(() => {
      this.timer = null;
      this.settle().catch(this.onError);
    }, this.syncIntervalMs());
    Deno.unrefTimer(timer as unknown as number);
    this.timer = timer;
  }

  private async settle(): Promise<void> {
    if (this.settling) return await this.settling;
    this.settling = (async () => {
      const batch = [...this.dirty];
      this.dirty.clear();
      for (let i = 0; i < batch.length; i += CHECKS_PER_COMMIT) {
        await this.settleBatch(batch.slice(i, i + CHECKS_PER_COMMIT));
      }
      this.sweep();
    })();
    try {
      await this.settling;
    } finally {
      this.settling = null;
      if (this.dirty.size > 0) this.schedule();
    }
  }

  /** Takes in what the KV holds for `e`, on top of this process's unsettled takes. */
  private adopt(e: Entry, got: Deno.KvEntryMaybe<number>): void {
    const v = typeof got.value === "number" ? got.value : 0;
    e.tat = merge(v, e.tat, e.pending, e.periodMs);
    e.stored = v;
    e.versionstamp = got.versionstamp;
  }

  /**
   * One checked commit against the versionstamps this process last saw (its request-path read
   * or its previous settle): no read when nobody else wrote the buckets meanwhile. A conflict
   * reads them again and retries.
   */
  private async settleBatch(batch: Entry[]): Promise<void> {
    try {
      // null: every attempt conflicted, and the takes wait for the next settle.
      const settled = await commitWithRetry("ratelimit.settle", async (n) => {
        if (n > 0) {
          this.count("gets");
          const got = await this.kv.getMany<number[]>(batch.map((e) => e.key));
          batch.forEach((e, i) => this.adopt(e, got[i]));
        }
        const now = Date.now();
        const taken = batch.map((e) => e.pending);
        const merged = batch.map((e, i) => merge(e.stored, e.tat, taken[i], e.periodMs));
        const op = this.kv.atomic();
        batch.forEach((e, i) => {
          op.check({ key: e.key, versionstamp: e.versionstamp });
          // Kept until the bucket has refilled (plus a minute): a full bucket is an absent key.
          op.set(e.key, merged[i], { expireIn: Math.max(0, merged[i] - now) + 60_000 });
        });
        this.count("commits");
        // The next settle checks the buckets against this versionstamp instead of reading them.
        return { op, landed: (at: string) => ({ now, taken, merged, at }) };
      }, {
        attempts: SETTLE_ATTEMPTS,
        between: (n) => {
          this.count("conflicts");
          return conflictPause(n);
        },
        otherwise: () => {
          this.count("conflicts");
          return null;
        },
      });
      if (settled) {
        const { now, taken, merged, at } = settled;
        batch.forEach((e, i) => {
          e.pending -= taken[i];
          e.stored = merged[i];
          e.versionstamp = at;
          // Takes made while the commit ran sit on top of the merged value.
          e.tat = Math.max(e.tat, merged[i] + e.pending * e.periodMs);
          e.syncedAt = now;
        });
        return;
      }
    } catch (err) {
      this.onError(err);
    }
    // Not settled: the takes stay pending for the next settle, never lost.
    for (const e of batch) if (e.pending > 0) this.dirty.add(e);
  }

  /**
   * Drops buckets that are full, settled and stale: absent means full, and the KV has the rest.
   * A view still fresh is kept: dropping it would cost a read when its identity comes back.
   */
  private sweep(): void {
    const now = Date.now();
    const interval = this.syncIntervalMs();
    const crowded = this.entries.size > MAX_ENTRIES;
    for (const [k, e] of this.entries) {
      if (e.pending > 0 || e.loading || this.dirty.has(e)) continue;
      if (crowded || (e.tat <= now && now - e.syncedAt > interval)) this.entries.delete(k);
    }
  }
}

function id(scope: string, cls: string, who: string): string {
  return `${scope}\u0000${cls}\u0000${who}`;
}
