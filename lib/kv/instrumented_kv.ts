// A Deno.Kv that reports operation latency to a callback; every KV user uses it like the real
// one. lib/services wires the callback to the metrics module (lib/kv does not import it).

export type ObserveOp = (op: string, seconds: number) => void;

/**
 * Wraps `kv` so get, getMany, set, delete, atomic().commit() and list are timed (successful or
 * not); everything else passes through. A `list` is observed once, when the iterator ends or
 * is closed, with the time spent awaiting its batches only: the consumer's own work between
 * entries is not KV latency.
 */
export function instrumentKv(kv: Deno.Kv, observe: ObserveOp): Deno.Kv {
  const timed =
    <A extends unknown[], R>(op: string, f: (...a: A) => Promise<R>) =>
    async (...a: A): Promise<R> => {
      const t = performance.now();
      try {
        return await f(...a);
      } finally {
        observe(op, (performance.now() - t) / 1000);
      }
    };
  const own: Record<PropertyKey, unknown> = {
    get: timed("get", kv.get.bind(kv)),
    getMany: timed("getMany", kv.getMany.bind(kv)),
    set: timed("set", kv.set.bind(kv)),
    delete: timed("delete", kv.delete.bind(kv)),
    atomic: () => {
      const op = kv.atomic();
      op.commit = timed("commit", op.commit.bind(op));
      return op;
    },
    list: <T>(selector: Deno.KvListSelector, options?: Deno.KvListOptions) =>
      timedList(kv.list<T>(selector, options), observe),
  };
  const bound = new Map<PropertyKey, unknown>();
  return new Proxy(kv, {
    get(target, prop) {
      if (prop in own) return own[prop];
      const v = Reflect.get(target, prop, target);
      if (typeof v !== "function") return v;
      // Deno.Kv methods use private state: call them on the real object.
      let b = bound.get(prop);
      if (!b) bound.set(prop, b = v.bind(target));
      return b;
    },
  });
}

function timedList<T>(
  inner: Deno.KvListIterator<T>,
  observe: ObserveOp,
): Deno.KvListIterator<T> {
  let spent = 0;
  let done = false;
  const finish = () => {
    if (done) return;
    done = true;
    observe("list", spent / 1000);
  };
  const it = {
    get cursor() {
      return inner.cursor;
    },
    async next(): Promise<IteratorResult<Deno.KvEntry<T>, undefined>> {
      const t = performance.now();
      try {
        const r = await inner.next();
        spent += performance.now() - t;
        if (r.done) finish();
        return r;
      } catch (e) {
        spent += performance.now() - t;
        finish();
        throw e;
      }
    },
    // Deno's list iterator holds no resource between batches: nothing to close.
    return(): Promise<IteratorResult<Deno.KvEntry<T>, undefined>> {
      finish();
      return Promise.resolve({ done: true, value: undefined });
    },
    [Symbol.asyncIterator]() {
      return it;
    },
  };
  return it as unknown as Deno.KvListIterator<T>;
}
