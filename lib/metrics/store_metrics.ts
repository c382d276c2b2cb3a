// The stores' instruments: KV and blob store latency, conflicted commits, and each store's free
// space, availability and refusals (issue 38).
import { Counter, Gauge, Histogram, MetricGroup } from "./instruments.ts";

/** Store operations: a KV get is ~20 µs locally, a remote KV or S3 call tens of ms. */
export const STORE_BUCKETS = [
  0.00005,
  0.0001,
  0.00025,
  0.0005,
  0.001,
  0.0025,
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  1,
  5,
];

/** One store's state as lib/storage's StoreWatch reports it (issue 38). */
export interface StoreFigures {
  store: string;
  /** bytes free on its filesystem; null: not on a local filesystem (S3, KV Connect) */
  freeBytes: number | null;
  reserveBytes: number | null;
  available: boolean;
}

/** The stores StoreFigures name: the blob store's bytes and the metadata KV. */
const BLOB_STORE = "blob";
const STORE_NAMES = [BLOB_STORE, "metadata"];

/** Writes a store refused, by store and cause (reserve, full, unavailable, locked, read_only). */
export interface StoreRefusals {
  store: string;
  cause: string;
  n: number;
}

/** What the KV and blob store decorators and StoreWatch (lib/storage) report. */
export class StoreMetrics extends MetricGroup {
  readonly kvDuration = this.set.add(
    new Histogram(
      "wharf_kv_operation_duration_seconds",
      "Deno KV operation latency by operation",
      ["op"],
      STORE_BUCKETS,
    ),
  );

  private readonly commitRetries = this.set.add(
    new Gauge(
      "wharf_kv_commit_retries",
      "Conflicted KV commit attempts and given-up changes since the process started, by operation",
      ["op", "outcome"],
    ),
  );

  private readonly storeFree = this.set.add(
    new Gauge(
      "wharf_store_free_bytes",
      "Bytes free on the filesystem of the blob store and of the KV file (local ones only)",
      ["store"],
    ),
  );

  private readonly storeReserve = this.set.add(
    new Gauge(
      "wharf_store_reserve_bytes",
      "Free bytes under which new uploads are refused ([blob_store] min_free_bytes)",
      ["store"],
    ),
  );

  private readonly storeAvailable = this.set.add(
    new Gauge(
      "wharf_store_available",
      "1 while the store takes writes; 0 while below its reserve or failing (as /readyz says)",
      ["store"],
    ),
  );

  private readonly storeRefusals = this.set.add(
    new Counter(
      "wharf_store_refusals_total",
      "Writes refused because a store could not take them, by store and cause",
      ["store", "cause"],
    ),
  );

  readonly blobStoreDuration = this.set.add(
    new Histogram(
      "wharf_blob_store_operation_duration_seconds",
      "Blob store operation latency by operation (stream reads: until the stream is open)",
      ["op"],
      STORE_BUCKETS,
    ),
  );

  /** Callbacks for the store decorators: `observe(op, seconds)`. */
  readonly observeKv = (op: string, seconds: number): void =>
    this.kvDuration.observe(seconds, [op]);
  readonly observeBlobStore = (op: string, seconds: number): void =>
    this.blobStoreDuration.observe(seconds, [op]);

  /** commitWithRetry's counters (lib/metadata), read at scrape time. */
  commitRetriesFrom(read: () => ReadonlyMap<string, { conflicts: number; exhausted: number }>) {
    this.commitRetries.collect = () => {
      for (const [op, c] of read()) {
        this.commitRetries.set(c.conflicts, [op, "conflict"]);
        this.commitRetries.set(c.exhausted, [op, "exhausted"]);
      }
    };
  }

  /** The stores' free space, availability and refusals (lib/storage StoreWatch), at scrape. */
  storesFrom(read: () => Promise<StoreFigures[]>, refusals: () => Iterable<StoreRefusals>): void {
    for (const store of STORE_NAMES) this.storeAvailable.set(1, [store]);
    this.storeAvailable.collect = async () => {
      for (const f of await read()) {
        this.storeAvailable.set(f.available ? 1 : 0, [f.store]);
        if (f.freeBytes !== null) this.storeFree.set(f.freeBytes, [f.store]);
        if (f.reserveBytes !== null) this.storeReserve.set(f.reserveBytes, [f.store]);
      }
      for (const r of refusals()) this.storeRefusals.series([r.store, r.cause]).v = r.n;
    };
  }
}
