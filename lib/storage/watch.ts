// Whether this process can write to its stores now, as /readyz, /metrics and the stores' own
// admission of new bytes need to know it: the free space of the filesystems under the blob store
// and the KV file (statfs, read at most once per READING_TTL_MS; bytes written since are
// subtracted), and the fault the last operations on each store met. Nothing here probes a store:
// the state is what real operations and the free-space readings left (SPEC §Health: /readyz does
// not probe the blob store).
import { statfs } from "node:fs/promises";
import { log } from "../log.ts";
import { type FaultReport, formatBytes, storeFault } from "./faults.ts";

export type StoreName = "blob" | "metadata";
const BLOB: StoreName = "blob";
/** The stores watched, the blob store first (messages name it first). */
const STORES: readonly StoreName[] = [BLOB, "metadata"];

/**
 * A statfs costs ~50 µs here (3.6 µs synchronous, which would stall the serving thread on a slow
 * network filesystem), so it is read once per second at most, never per chunk: a new upload
 * checks the cached reading less the bytes this process wrote since.
 */
const READING_TTL_MS = 1000;
/** Without min_free_bytes: 1% of the filesystem, at most this much. */
export const DEFAULT_RESERVE_MAX = 256 << 20;
const DEFAULT_RESERVE_SHARE = 0.01;
/**
 * How long a fault is reported after the last operation that met it, unless an operation on the
 * store succeeds first: an instance taken out of rotation gets no traffic that could clear it.
 */
export const FAULT_HOLD_MS = 15_000;

/** Where a store lives, for messages and for the free-space readings. */
export interface WatchedStore {
  /** how messages name it: `the blob store (/data/blobs)` */
  label: string;
  /** a directory on its local filesystem; null: not local (S3, KV Connect) */
  dir: string | null;
}

export interface StoreWatchOptions {
  blob: WatchedStore;
  metadata: WatchedStore;
  /** `[blob_store] min_free_bytes`; null: the default (1% of the filesystem, ≤ 256 MiB) */
  minFreeBytes: number | null;
}

interface Volume {
  stores: StoreName[];
  label: string;
  dir: string;
  free: number;
  total: number;
  reserve: number;
  /** when `free` was read (ms); 0: never read, or unreadable */
  at: number;
  /** below its reserve at the last reading (logged when that changes) */
  below: boolean;
}

interface Fault {
  cause: string;
  detail: string;
  at: number;
}

/** One store's figures for /metrics. */
export interface StoreFigures {
  store: StoreName;
  /** bytes free on its filesystem (null: not local, or unreadable) */
  freeBytes: number | null;
  reserveBytes: number | null;
  /** no fault reported within FAULT_HOLD_MS and not below its reserve */
  available: boolean;
}

export class StoreWatch {
  private volumes: Volume[] | null = null;
  private reading: Promise<void> | null = null;
  private readAt = 0;
  private readonly faults = new Map<StoreName, Fault>();
  /** refusals by `store` and cause (reserve, full, unavailable, locked, read_only) */
  readonly refusals = new Map<string, { store: StoreName; cause: string; n: number }>();
  readonly blob: FaultReport;
  readonly metadata: FaultReport;

  constructor(private readonly opts: StoreWatchOptions) {
    this.blob = this.reporter("blob");
    this.metadata = this.reporter("metadata");
  }

  private reporter(store: StoreName): FaultReport {
    return {
      ok: () => {
        if (this.faults.size === 0) return;
        const was = this.faults.get(store);
        if (!was) return;
        this.faults.delete(store);
        log.info("store works again", { store, was: was.detail });
      },
      fault: (cause, detail) => {
        // One line per change, not per refused request.
        if (this.faults.get(store)?.cause !== cause) log.warn("store fault", { store, detail });
        this.faults.set(store, { cause, detail, at: Date.now() });
        this.count(store, cause);
      },
    };
  }

  private count(store: StoreName, cause: string): void {
    const k = `${store}\0${cause}`;
    const r = this.refusals.get(k);
    if (r) r.n++;
    else this.refusals.set(k, { store, cause, n: 1 });
  }

  /**
   * Refuses new bytes (an upload's body, a manifest, a derived file) with 503 while a watched
   * filesystem is below its reserve, so what frees space (deletes, scrub, metadata commits)
   * still finds room. Costs a statfs per filesystem at most once per READING_TTL_MS.
   */
  async admit(): Promise<void> {
    if (Date.now() - this.readAt > READING_TTL_MS) await this.refresh();
    for (const v of this.volumes!) {
      if (v.at === 0 || v.free >= v.reserve) continue;
      for (const s of v.stores) this.count(s, "reserve");
      throw storeFault("full", v.label, belowReserve(v));
    }
  }

  /**
   * Why the blob store takes no new bytes now (below its reserve, or full or failing within
   * FAULT_HOLD_MS), or null: a pull-through cache then passes a blob through uncached instead of
   * starting a fill that would be refused. Counted as a refusal, like admit's.
   */
  async blobRefusal(): Promise<string | null> {
    if (Date.now() - this.readAt > READING_TTL_MS) await this.refresh();
    for (const v of this.volumes ?? []) {
      if (v.at === 0 || v.free >= v.reserve || !v.stores.includes("blob")) continue;
      this.count("blob", "reserve");
      return belowReserve(v);
    }
    const f = this.faults.get("blob");
    if (f && Date.now() - f.at <= FAULT_HOLD_MS) {
      this.count("blob", f.cause);
      return f.detail;
    }
    return null;
  }

  /** `n` bytes were written to the blob store's filesystem since its last reading. */
  spent(n: number): void {
    for (const v of this.volumes ?? []) if (v.stores.includes("blob")) v.free -= n;
  }

  /** Reads the free space of every watched filesystem now (one at a time across callers). */
  refresh(): Promise<void> {
    this.reading ??= this.read().finally(() => (this.reading = null));
    return this.reading;
  }

  private async read(): Promise<void> {
    this.volumes ??= await this.place();
    await Promise.all(this.volumes.map(async (v) => {
      try {
        const s = await statfs(v.dir);
        v.free = s.bavail * s.bsize;
        v.total = s.blocks * s.bsize;
        v.reserve = this.opts.minFreeBytes ??
          Math.min(DEFAULT_RESERVE_MAX, Math.floor(v.total * DEFAULT_RESERVE_SHARE));
        v.at = Date.now();
        const below = v.free < v.reserve;
        if (below !== v.below) {
          if (below) {
            log.warn("store below its free-space reserve", {
              detail: `${v.label}: ${belowReserve(v)}`,
            });
          } else log.info("store above its free-space reserve again", { store: v.label });
          v.below = below;
        }
      } catch {
        v.at = 0; // unreadable now (removed, not mounted): judged by the operations instead
      }
    }));
    this.readAt = Date.now();
  }

  /** The filesystems to read: one per device, so a shared one is read and reported once. */
  private async place(): Promise<Volume[]> {
    const out: (Volume & { dev: number | null })[] = [];
    for (const name of STORES) {
      const s = this.opts[name];
      if (s.dir === null) continue;
      const dev = await Deno.stat(s.dir).then((st) => st.dev, () => null);
      const same = dev === null ? undefined : out.find((v) => v.dev === dev);
      if (same) {
        same.stores.push(name);
        same.label = `the filesystem of ${same.label} and ${s.label}`;
        continue;
      }
      out.push({
        stores: [name],
        label: s.label,
        dir: s.dir,
        dev,
        free: 0,
        total: 0,
        reserve: 0,
        at: 0,
        below: false,
      });
    }
    return out;
  }

  /**
   * What keeps this process from taking writes, one sentence each (empty: nothing): a
   * filesystem below its reserve, or a fault met within FAULT_HOLD_MS. Reads free space again
   * when the last reading is older than READING_TTL_MS; probes nothing else.
   */
  async problems(): Promise<string[]> {
    if (Date.now() - this.readAt > READING_TTL_MS) await this.refresh();
    const out: string[] = [];
    for (const v of this.volumes ?? []) {
      if (v.at !== 0 && v.free < v.reserve) {
        out.push(`${v.label} is full (${belowReserve(v)})`);
      }
    }
    const now = Date.now();
    for (const [store, f] of this.faults) {
      if (now - f.at > FAULT_HOLD_MS) this.faults.delete(store);
      else out.push(`${f.detail} (${Math.round((now - f.at) / 1000)} s ago)`);
    }
    return out;
  }

  /** Per store: free bytes, reserve, availability (for /metrics; reads free space if stale). */
  async figures(): Promise<StoreFigures[]> {
    if (Date.now() - this.readAt > READING_TTL_MS) await this.refresh();
    const now = Date.now();
    return STORES.map((store) => {
      const v = this.volumes?.find((x) => x.stores.includes(store) && x.at !== 0);
      const f = this.faults.get(store);
      const faulted = f !== undefined && now - f.at <= FAULT_HOLD_MS;
      return {
        store,
        freeBytes: v ? Math.max(0, v.free) : null,
        reserveBytes: v ? v.reserve : null,
        available: !faulted && !(v && v.free < v.reserve),
      };
    });
  }
}

function belowReserve(v: Volume): string {
  return `${formatBytes(Math.max(0, v.free))} free, under the ${
    formatBytes(v.reserve)
  } reserve of [blob_store] min_free_bytes; new uploads are refused until space is freed`;
}
