// Prefetch (issue 25): when a pull-through manifest has come from the upstream and a client GETs
// one of its layers, the manifest's other blobs of at most `prefetch_max_bytes` are filled at
// once, a few at a time, ahead of the client's GETs for them. The trigger is the first layer
// GET, not the manifest fetch: a client that only inspects an image (`skopeo inspect`: the
// manifest and the config) or a sync checking what is cached must not pull its layers. A client pulling many small layers pays a round trip to the upstream
// plus Wharf's fixed work per blob; with the fills already running, its GETs follow a fill in
// flight (blob_fill.ts: one upstream fetch per digest) or read the stored blob. Big blobs are
// left to the client's own GETs: their transfer dwarfs the fixed cost, and an inspection that
// reads only the manifest should not pull gigabytes.
//
// Best effort, bounded: a process-wide queue of at most MAX_QUEUED entries (more are dropped),
// PREFETCH_CONCURRENCY fills at a time beside the clients' own, no `cache` job (a fill lost
// with its process is fetched again by the client that wants it) and no error reaches a client.
import { log } from "../log.ts";

/** Prefetch fills running at once in one process (beside the clients' own fills). */
export const PREFETCH_CONCURRENCY = 8;
/** Entries waiting in one process; a manifest's blobs past it are left to the client's GETs. */
export const MAX_QUEUED = 1024;
/** Blobs taken from one manifest (a config and its layers). */
export const MAX_PER_MANIFEST = 128;

export interface PrefetchItem {
  ns: string;
  digest: string;
}

/** Fills `item` (stored and linked in its namespace when it resolves). */
export type PrefetchFill = (item: PrefetchItem, signal: AbortSignal) => Promise<unknown>;

export class Prefetcher {
  #queue: PrefetchItem[] = [];
  #head = 0;
  /** `ns@digest` of every entry queued or running: a second manifest naming it adds nothing */
  #pending = new Set<string>();
  #running = 0;
  readonly #stop = new AbortController();

  constructor(
    private readonly fill: PrefetchFill,
    private readonly concurrency = PREFETCH_CONCURRENCY,
    private readonly maxQueued = MAX_QUEUED,
  ) {}

  /** Queues the blobs of one manifest, in order (a client asks for the config first). */
  add(ns: string, digests: readonly string[]): number {
    if (this.#stop.signal.aborted) return 0;
    let added = 0;
    for (const digest of digests.slice(0, MAX_PER_MANIFEST)) {
      if (this.#queue.length - this.#head >= this.maxQueued) break;
      const key = `${ns}@${digest}`;
      if (this.#pending.has(key)) continue;
      this.#pending.add(key);
      this.#queue.push({ ns, digest });
      added++;
    }
    this.#pump();
    return added;
  }

  /** Entries waiting and running (tests and shutdown). */
  get size(): number {
    return this.#queue.length - this.#head + this.#running;
  }

  /** Stops taking entries and aborts the waits of those running (their fills finish alone). */
  close(): void {
    this.#stop.abort();
    this.#queue = [];
    this.#head = 0;
    this.#pending.clear();
  }

  #pump(): void {
    while (this.#running < this.concurrency && this.#head < this.#queue.length) {
      const item = this.#queue[this.#head++];
      if (this.#head > 64 && this.#head * 2 > this.#queue.length) {
        this.#queue = this.#queue.slice(this.#head);
        this.#head = 0;
      }
      this.#running++;
      this.fill(item, this.#stop.signal).catch((e) => {
        if (this.#stop.signal.aborted) return;
        log.info("prefetch left to the client's own GET", {
          namespace: item.ns,
          digest: item.digest,
          error: e instanceof Error ? e.message : String(e),
        });
      }).finally(() => {
        this.#running--;
        this.#pending.delete(`${item.ns}@${item.digest}`);
        this.#pump();
      });
    }
  }
}

/** Manifests remembered per process; the oldest is forgotten first. */
export const MAX_AWAITING = 512;
/** A manifest whose layers no one asked for within this long is forgotten. */
export const AWAITING_MS = 5 * 60_000;

interface Awaiting {
  blobs: readonly string[];
  at: number;
  taken: boolean;
}

/**
 * Recently fetched manifests waiting for a first layer GET: `ns@layer` → the blobs to prefetch.
 * Bounded in manifests (MAX_AWAITING) and in layers per manifest (MAX_PER_MANIFEST).
 */
export class AwaitingLayer {
  #byLayer = new Map<string, Awaiting>();
  #order: { keys: string[]; entry: Awaiting }[] = [];

  constructor(private readonly max = MAX_AWAITING, private readonly ttlMs = AWAITING_MS) {}

  add(ns: string, layers: readonly string[], blobs: readonly string[]): void {
    const entry: Awaiting = { blobs, at: Date.now(), taken: false };
    const keys = layers.slice(0, MAX_PER_MANIFEST).map((d) => `${ns}@${d}`);
    for (const k of keys) this.#byLayer.set(k, entry);
    this.#order.push({ keys, entry });
    while (this.#order.length > this.max) this.#forget(this.#order.shift()!);
  }

  /** The blobs to prefetch when `digest` is a layer of a manifest waiting for one; once. */
  take(ns: string, digest: string): readonly string[] | null {
    const entry = this.#byLayer.get(`${ns}@${digest}`);
    if (!entry || entry.taken || Date.now() - entry.at > this.ttlMs) return null;
    entry.taken = true;
    return entry.blobs;
  }

  #forget(o: { keys: string[]; entry: Awaiting }): void {
    for (const k of o.keys) if (this.#byLayer.get(k) === o.entry) this.#byLayer.delete(k);
  }
}
