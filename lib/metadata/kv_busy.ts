// Deno KV's SQLite backend answers a write with "database is locked" at once (no busy wait)
// when another process wrote the file since this write's transaction began — measured here:
// two processes committing to one file see ~45% of commits fail that way. `main.ts scrub`
// runs beside the server on the same file, so every write is retried after a short jittered
// pause. A failed commit applied nothing (it is atomic), so re-sending it is safe; reads never
// hit this in WAL mode.

const ATTEMPTS = 200;

function isBusy(e: unknown): boolean {
  return e instanceof Error && /database is locked|database is busy/i.test(e.message);
}

async function retrying<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1;; attempt++) {
    try {
      return await fn();
    } catch (e) {
      if (!isBusy(e) || attempt >= ATTEMPTS) throw e;
      await new Promise((r) => setTimeout(r, Math.random() * Math.min(2 * attempt, 25)));
    }
  }
}

function retryingAtomic(op: Deno.AtomicOperation): Deno.AtomicOperation {
  const commit = op.commit.bind(op);
  op.commit = () => retrying(commit);
  return op;
}

/** The same Kv, with writes retried while another process holds the SQLite write lock. */
export function withBusyRetry(kv: Deno.Kv): Deno.Kv {
  return new Proxy(kv, {
    get(target, prop) {
      switch (prop) {
        case "atomic":
          return () => retryingAtomic(target.atomic());
        case "set":
          return (key: Deno.KvKey, value: unknown, o?: { expireIn?: number }) =>
            retrying(() => target.set(key, value, o));
        case "delete":
          return (key: Deno.KvKey) => retrying(() => target.delete(key));
      }
      const v = Reflect.get(target, prop, target);
      return typeof v === "function" ? v.bind(target) : v;
    },
  });
}
