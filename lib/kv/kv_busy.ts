// Deno KV's SQLite backend answers a write with "database is locked" at once (no busy wait)
// when another process wrote the file since this write's transaction began — measured here:
// two processes committing to one file see ~45% of commits fail that way. `main.ts scrub`
// runs beside the server on the same file, so every write is retried after a short jittered
// pause. A failed commit applied nothing (it is atomic), so re-sending it is safe; reads never
// hit this in WAL mode.
//
// A process that holds the write lock (an operator's sqlite3 shell in a transaction, a stuck
// tool) is another matter: Deno then waits 5 s per write before "database is locked", and its
// writes queue behind one another (five concurrent writes measured 5, 10, 15 s...). So retries
// stop after BUSY_BOUND_MS, the write answers 503 naming the file (kv_faults.ts), and while the
// lock stays every later write but one (the probe that notices its release) fails within
// PROBE_WAIT_MS instead of queueing for its 5 s. It waits that long for the probe because a
// probe that began while the lock was held ends only at SQLite's next busy-handler wake-up
// after the release (≤ 100 ms): a write arriving in between must not be refused for a lock
// that is already gone (a CI run saw exactly that: the first push after the release, 503).
//
// A file that was read-only when the process opened it (a restore with the wrong owner, `chattr
// +i`) gives a handle that stays read-only after the file is fixed: a write refused that way opens
// the file again (at most every REOPEN_EVERY_MS) and, once the new handle can write, every later
// write goes to it, so a fixed file needs no restart.
import { kvFaultError, type KvFaultKind, kvFaultKind } from "./kv_faults.ts";

const ATTEMPTS = 200;
const REOPEN_EVERY_MS = 2_000;
/** How long a write waits for the probe in flight before it is refused for the lock. */
export const PROBE_WAIT_MS = 400;
/**
 * Retries of a write refused for the lock stop once it has waited this long: contention between
 * writers clears in milliseconds, and a held lock's first refusal comes after Deno's 5 s.
 */
export const BUSY_BOUND_MS = 3_000;

function isBusy(e: unknown): boolean {
  return e instanceof Error && /database is locked|database is busy/i.test(e.message);
}

/** The KV file a wrapper writes to, and who hears whether its writes reach it. */
export interface KvWriteWatch {
  /** the file, as errors name it */
  path: string;
  /** every write's outcome: null when it reached the file, else why it could not */
  report?: (fault: { kind: KvFaultKind; detail: string } | null) => void;
  /** opens the file again, resolving only with a handle that can write (openMetadata's) */
  reopen?: () => Promise<Deno.Kv>;
}

/** Runs the writes of one KV handle: retried while busy, faults answered as 503. */
class Writes {
  /** when a write last gave up on another process's lock; 0: no lock seen since */
  private lockedAt = 0;
  /** the probe in flight: resolves true when its write reached the file */
  private probing: Promise<boolean> | null = null;
  private reopenedAt = 0;
  /** the handles writes went to before (closed with the current one) */
  readonly retired: Deno.Kv[] = [];
  constructor(private readonly watch: KvWriteWatch, public current: Deno.Kv) {}

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.lockedAt !== 0 && this.probing) {
      if (!(await settledWithin(this.probing, PROBE_WAIT_MS))) {
        throw this.fault("locked", new Error("database is locked (held by another process)"));
      }
      // The probe got through: the lock is gone, this write goes on as any other.
    }
    const probe = this.lockedAt !== 0;
    let reached!: (ok: boolean) => void;
    if (probe) this.probing = new Promise((r) => reached = r);
    let ok = false;
    try {
      const r = await retrying(fn);
      ok = true;
      this.lockedAt = 0;
      this.watch.report?.(null);
      return r;
    } catch (e) {
      const kind = kvFaultKind(e);
      if (!kind) throw e;
      if (kind === "locked") this.lockedAt = Date.now();
      if (kind === "read_only") await this.reopen();
      throw this.fault(kind, e as Error);
    } finally {
      if (probe) {
        this.probing = null;
        reached(ok);
      }
    }
  }

  /** A fresh handle for the writes that follow, if the file can be written now. */
  private async reopen(): Promise<void> {
    if (!this.watch.reopen || Date.now() - this.reopenedAt < REOPEN_EVERY_MS) return;
    this.reopenedAt = Date.now();
    try {
      const fresh = await this.watch.reopen();
      // Reads already bound to the old handle keep it: it reads the same file.
      this.retired.push(this.current);
      this.current = fresh;
    } catch {
      // still read-only: the next refused write tries again
    }
  }

  private fault(kind: KvFaultKind, e: Error): Error {
    const err = kvFaultError(kind, this.watch.path, e);
    this.watch.report?.({ kind, detail: err.detail });
    return err;
  }
}

/** Whether `p` resolved true within `ms` (false on timeout). */
async function settledWithin(p: Promise<boolean>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<boolean>((r) => timer = setTimeout(() => r(false), ms)),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

async function retrying<T>(fn: () => Promise<T>): Promise<T> {
  const t0 = Date.now();
  for (let attempt = 1;; attempt++) {
    try {
      return await fn();
    } catch (e) {
      if (!isBusy(e) || attempt >= ATTEMPTS || Date.now() - t0 >= BUSY_BOUND_MS) throw e;
      await new Promise((r) => setTimeout(r, Math.random() * Math.min(2 * attempt, 25)));
    }
  }
}

/**
 * The same Kv, with writes retried while another process holds the SQLite write lock and a
 * write the file cannot take (full, locked past the bound, read-only) thrown as a 503
 * RegistryError naming it.
 */
export function withBusyRetry(kv: Deno.Kv, watch: KvWriteWatch = { path: "KV" }): Deno.Kv {
  const writes = new Writes(watch, kv);
  return new Proxy(kv, {
    get(_, prop) {
      const target = writes.current;
      switch (prop) {
        case "atomic":
          return () => {
            const op = writes.current.atomic();
            const commit = op.commit.bind(op);
            op.commit = () => writes.run(commit);
            return op;
          };
        case "set":
          return (key: Deno.KvKey, value: unknown, o?: { expireIn?: number }) =>
            writes.run(() => writes.current.set(key, value, o));
        case "delete":
          return (key: Deno.KvKey) => writes.run(() => writes.current.delete(key));
        case "close":
          return () => {
            for (const old of writes.retired) old.close();
            writes.current.close();
          };
      }
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}
