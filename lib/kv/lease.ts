// The one lease of Wharf: one KV key saying who holds some work and until when, so one process
// at a time does it across every process on the KV (a scrub, a verify pass, a repository's sync,
// a webhook's outbox). Taken and renewed with a versionstamp check, so two takers never both win;
// free once its holder stops renewing it (a kill -9 costs one term at most); released only by its
// holder. A holder name that outlives a process (a server's own, a job's id) takes over its
// predecessor's live lease at once. While work runs, `holdWhileRunning` renews it every third of
// its term and aborts the work's signal when a renewal finds another holder. A job's claim, whose
// lease end is part of its record's key (lib/jobs), and the cache hold's pull stamps are renewed by
// the same loop (`keepRenewed`), so there is one renewal timer.
import { commitWithRetry } from "./commit_retry.ts";

/** Who holds a lease and until when (ms since the epoch). */
export interface LeaseState {
  holder: string;
  until: number;
}

/** A live lease as read: its holder, its end and the stored value (which may say more). */
export interface LeaseHolder<V> extends LeaseState {
  value: V;
}

/**
 * How a lease's value is stored, so each lease keeps the layout it was written with: its end
 * (`{ holder, until }`) or its last renewal (`{ at, holder }`, whose reader adds the term).
 */
export interface LeaseFormat<V> {
  /** the value a take or renewal by `holder` at `now` for `ttlMs` stores */
  write(holder: string, now: number, ttlMs: number): V;
  /** who holds a stored value and until when */
  read(value: V): LeaseState;
  /** what a release leaves (default: the key is deleted) */
  released?(holder: string): V;
}

/** The layout `{ holder, until }`, deleted on release. */
export const UNTIL_FORMAT: LeaseFormat<LeaseState> = {
  write: (holder, now, ttlMs) => ({ holder, until: now + ttlMs }),
  read: (v) => v,
};

export type Taken<V> = { ok: true; lease: Lease<V> } | Refused<V>;
type Refused<V> = { ok: false; held: LeaseHolder<V> };
/** What a take or renewal wrote. */
type Written<V> = { value: V; versionstamp: string };

/** Something held for a term and renewed while work runs (a Lease, a job's claim). */
export interface Renewable {
  readonly ttlMs: number;
  /** extends the term; false once another holder has it */
  renew(): Promise<boolean>;
  /** gives it up, if still held */
  release(): Promise<void>;
}

/** The abort reason of work whose lease another holder took. */
export class LeaseLost extends Error {
  constructor(what?: string) {
    super(what ? `${what} lease lost` : "lease lost");
    this.name = "LeaseLost";
  }
}

/** The leases of one kind (one value layout) on a KV. */
export class Leases<V> {
  constructor(
    private readonly kv: Deno.Kv,
    private readonly format: LeaseFormat<V>,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Takes the lease at `key` for `holder` for `ttlMs`, unless another holder's is live: then
   * `held` says whose. `holder`'s own live lease is taken again (renewed).
   */
  async take(key: Deno.KvKey, holder: string, ttlMs: number): Promise<Taken<V>> {
    const r = await this.write(key, holder, ttlMs);
    return "held" in r ? r : { ok: true, lease: new Lease(this, key, holder, ttlMs, r) };
  }

  /** Extends `lease` by its term; false when another holder has it now. */
  async renew(lease: Lease<V>): Promise<boolean> {
    const r = await this.write(lease.key, lease.holder, lease.ttlMs);
    if ("held" in r) return false;
    lease.landed(r);
    return true;
  }

  /** Gives `lease` up, if its holder still holds it (after a takeover, nothing happens). */
  async release(lease: Lease<V>): Promise<void> {
    await commitWithRetry<void>("lease.release", async () => {
      const e = await this.kv.get<V>(lease.key);
      if (this.state(e.value)?.holder !== lease.holder) return { done: undefined };
      return { op: this.releasing(this.kv.atomic().check(e), lease), value: undefined };
    });
  }

  /**
   * Adds `lease`'s release to a caller's commit, checked against the lease as last written: the
   * commit lands only if nobody took the lease meanwhile (one check, whatever else it writes).
   */
  releaseInto(op: Deno.AtomicOperation, lease: Lease<V>): Deno.AtomicOperation {
    return this.releasing(op.check({ key: lease.key, versionstamp: lease.versionstamp }), lease);
  }

  /** Who holds the lease at `key` now; null when nobody (free, run out or unreadable). */
  async holder(key: Deno.KvKey): Promise<LeaseHolder<V> | null> {
    return this.live(await this.kv.get<V>(key));
  }

  private releasing(op: Deno.AtomicOperation, lease: Lease<V>): Deno.AtomicOperation {
    const released = this.format.released;
    return released ? op.set(lease.key, released(lease.holder)) : op.delete(lease.key);
  }

  private write(
    key: Deno.KvKey,
    holder: string,
    ttlMs: number,
  ): Promise<Refused<V> | Written<V>> {
    return commitWithRetry<Refused<V> | Written<V>>("lease.take", async () => {
      const e = await this.kv.get<V>(key);
      const held = this.live(e);
      if (held && held.holder !== holder) return { done: { ok: false, held } };
      const value = this.format.write(holder, this.now(), ttlMs);
      return {
        op: this.kv.atomic().check(e).set(key, value),
        landed: (versionstamp) => ({ value, versionstamp }),
      };
    });
  }

  private live(e: Deno.KvEntryMaybe<V>): LeaseHolder<V> | null {
    const s = this.state(e.value);
    return s && e.value !== null && s.until > this.now() ? { ...s, value: e.value } : null;
  }

  /** A stored value read leniently: no holder is nobody's, an unreadable end has run out. */
  private state(v: V | null): LeaseState | null {
    if (v === null || typeof v !== "object") return null;
    const s = this.format.read(v);
    if (typeof s.holder !== "string") return null;
    return { holder: s.holder, until: Number.isFinite(s.until) ? s.until : 0 };
  }
}

/** A lease this process holds (Leases.take); `versionstamp` and `value` follow each renewal. */
export class Lease<V> implements Renewable {
  constructor(
    private readonly leases: Leases<V>,
    readonly key: Deno.KvKey,
    readonly holder: string,
    readonly ttlMs: number,
    written: Written<V>,
  ) {
    this.value = written.value;
    this.versionstamp = written.versionstamp;
  }

  value: V;
  versionstamp: string;

  renew(): Promise<boolean> {
    return this.leases.renew(this);
  }

  release(): Promise<void> {
    return this.leases.release(this);
  }

  /** Leases.renew's write landed. */
  landed(written: Written<V>): void {
    this.value = written.value;
    this.versionstamp = written.versionstamp;
  }
}

export interface RenewOptions {
  /** names the lease in LeaseLost's message ("sync" → "sync lease lost") */
  name?: string;
  /** a renewal that failed (the KV, not a takeover): the next one tries again */
  onError?: (e: unknown) => void;
  /** the loop does not keep the process alive (a stream's hold) */
  unref?: boolean;
}

export interface Renewal {
  /** aborted, with a LeaseLost, once a renewal answers false; renewals stop then */
  readonly signal: AbortSignal;
  /** no renewal after this; resolves once one under way has settled */
  stop(): Promise<void>;
}

/** How often a lease of `ttlMs` is renewed: a third of its term, so two renewals may fail. */
export const renewEvery = (ttlMs: number): number => Math.max(200, ttlMs / 3);

/**
 * Calls `renew` every `everyMs` until stopped or it answers false (lost). A renewal still under
 * way when the next is due is not queued behind: that tick is skipped.
 */
export function keepRenewed(
  renew: () => Promise<boolean>,
  everyMs: number,
  opts: RenewOptions = {},
): Renewal {
  const lost = new AbortController();
  let running: Promise<void> | null = null;
  const tick = async () => {
    try {
      if (!(await renew())) {
        clearInterval(timer);
        lost.abort(new LeaseLost(opts.name));
      }
    } catch (e) {
      opts.onError?.(e);
    }
  };
  const timer = setInterval(() => {
    if (running || lost.signal.aborted) return;
    running = tick().finally(() => running = null);
  }, everyMs);
  if (opts.unref) Deno.unrefTimer(timer);
  return {
    signal: lost.signal,
    stop: async () => {
      clearInterval(timer);
      await running;
    },
  };
}

export interface HoldOptions extends RenewOptions {
  /** aborts the work too (a stop, a Ctrl+C) */
  signal?: AbortSignal;
}

/**
 * Runs `fn` holding `lease`: renewed every third of its term while `fn` runs, `fn`'s signal
 * aborted (reason LeaseLost) when a renewal finds another holder, released once `fn` settled
 * (a failed release is only reported: the lease runs out). `fn`'s result or error is its own.
 */
export async function holdWhileRunning<T>(
  lease: Renewable,
  fn: (signal: AbortSignal) => Promise<T>,
  opts: HoldOptions = {},
): Promise<T> {
  const renewal = keepRenewed(() => lease.renew(), renewEvery(lease.ttlMs), opts);
  const signal = opts.signal ? AbortSignal.any([opts.signal, renewal.signal]) : renewal.signal;
  try {
    return await fn(signal);
  } finally {
    await renewal.stop();
    await lease.release().catch((e) => opts.onError?.(e));
  }
}
