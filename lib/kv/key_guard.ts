// keys.ts is the map of the KV layout only while every key is built there. A key whose first
// part keys.ts does not list was built somewhere else (a string literal in a module, a prefix
// constant of its own): under this guard it throws before it reaches the KV, so the test that
// reaches it fails. Tests run the servers under it (strictIfRequested); production does not pay
// for it.
import { KEY_PREFIXES } from "./keys.ts";

export class UnlistedKeyError extends Error {}

/** Why `key` is not one keys.ts builds, or null. The empty key (a whole-KV listing) is fine. */
export function unlistedKey(key: Deno.KvKey | undefined): string | null {
  if (key === undefined || key.length === 0) return null;
  const head = key[0];
  if (typeof head === "string" && KEY_PREFIXES.has(head)) return null;
  return `key outside lib/kv/keys.ts: ${JSON.stringify(String(head)).slice(0, 80)}/…`;
}

/**
 * The same Kv, except that reading, listing, watching, checking or writing a key that keys.ts
 * does not build throws UnlistedKeyError, after `report` saw it. Patches the operation object
 * itself, as enforceKvLimits does, so the wrappers compose in any order.
 */
export function enforceListedKeys(kv: Deno.Kv, report: (msg: string) => void): Deno.Kv {
  /** The error for the first unlisted key of `keys` (reported), or null. */
  const refusal = (...keys: (Deno.KvKey | undefined)[]): UnlistedKeyError | null => {
    for (const k of keys) {
      const why = unlistedKey(k);
      if (why) {
        report(why);
        return new UnlistedKeyError(why);
      }
    }
    return null;
  };
  const guard = (...keys: (Deno.KvKey | undefined)[]) => {
    const e = refusal(...keys);
    if (e) throw e;
  };
  const atomic = () => {
    const op = kv.atomic();
    const check = op.check.bind(op);
    op.check = (...checks: Deno.AtomicCheck[]) => {
      guard(...checks.map((c) => c.key));
      return check(...checks);
    };
    const set = op.set.bind(op);
    op.set = (key: Deno.KvKey, value: unknown, o?: { expireIn?: number }) => {
      guard(key);
      return set(key, value, o);
    };
    const del = op.delete.bind(op);
    op.delete = (key: Deno.KvKey) => {
      guard(key);
      return del(key);
    };
    for (const name of ["sum", "min", "max"] as const) {
      const f = op[name].bind(op);
      op[name] = (key: Deno.KvKey, n: bigint) => {
        guard(key);
        return f(key, n);
      };
    }
    const mutate = op.mutate.bind(op);
    op.mutate = (...ms: Deno.KvMutation[]) => {
      guard(...ms.map((m) => m.key));
      return mutate(...ms);
    };
    return op;
  };
  const selectorKeys = (s: Deno.KvListSelector): (Deno.KvKey | undefined)[] =>
    "prefix" in s
      ? [s.prefix, (s as { start?: Deno.KvKey }).start, (s as { end?: Deno.KvKey }).end]
      : [s.start, s.end];
  return new Proxy(kv, {
    get(target, prop) {
      switch (prop) {
        case "atomic":
          return atomic;
        case "get":
          return (key: Deno.KvKey, o?: { consistency?: Deno.KvConsistencyLevel }) => {
            const e = refusal(key);
            return e ? Promise.reject(e) : target.get(key, o);
          };
        case "getMany":
          return (keys: Deno.KvKey[], o?: { consistency?: Deno.KvConsistencyLevel }) => {
            const e = refusal(...keys);
            return e ? Promise.reject(e) : target.getMany(keys, o);
          };
        case "set":
          return (key: Deno.KvKey, value: unknown, o?: { expireIn?: number }) => {
            const e = refusal(key);
            return e ? Promise.reject(e) : target.set(key, value, o);
          };
        case "delete":
          return (key: Deno.KvKey) => {
            const e = refusal(key);
            return e ? Promise.reject(e) : target.delete(key);
          };
        case "list":
          return (selector: Deno.KvListSelector, o?: Deno.KvListOptions) => {
            guard(...selectorKeys(selector));
            return target.list(selector, o);
          };
        case "watch":
          return (keys: Deno.KvKey[], o?: { raw?: boolean }) => {
            guard(...keys);
            return target.watch(keys, o);
          };
      }
      const f = Reflect.get(target, prop, target);
      return typeof f === "function" ? f.bind(target) : f;
    },
  });
}
