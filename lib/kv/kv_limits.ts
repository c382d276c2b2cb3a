// The limits of the strictest Deno KV backend Wharf runs on (Deno Deploy, a self-hosted
// `denokv`, a local file), and the arithmetic to stay within them. The local SQLite backend
// allows 100 checks per commit, the others 10, so a commit that passes here can still fail
// there: every commit is planned against KV_LIMITS, and tests run the whole suite under
// `enforceKvLimits`, which fails any commit past them.
//
// Sizes follow Deno's own accounting (ext/kv): a commit's "total key size" counts the keys of
// value-carrying mutations (set, sum, min, max); its "total mutation size" counts every check
// and mutation key, plus each value-carrying mutation's key and value once more.
import { serialize } from "node:v8";
import { enforceListedKeys } from "./key_guard.ts";

export const KV_LIMITS = {
  checks: 10,
  mutations: 1000,
  /** keys of value-carrying mutations, per commit */
  keyBytes: 80 * 1024,
  /** keys and values, per commit */
  totalBytes: 800 * 1024,
  valueBytes: 64 * 1024,
  keyMax: 2048,
} as const;

const utf8 = new TextEncoder();

function zeros(b: Uint8Array): number {
  let n = 0;
  for (const x of b) if (x === 0) n++;
  return n;
}

/** Bytes of a key in KV's tuple encoding (strings and bytes escape NUL, numbers take 9). */
export function keySize(key: Deno.KvKey): number {
  let n = 0;
  for (const part of key) {
    if (typeof part === "string") {
      const b = utf8.encode(part);
      n += 2 + b.byteLength + zeros(b);
    } else if (part instanceof Uint8Array) n += 2 + part.byteLength + zeros(part);
    else if (typeof part === "number") n += 9;
    else if (typeof part === "bigint") n += 2 + Math.ceil(part.toString(16).length / 2);
    else n += 1;
  }
  return n;
}

/**
 * Bytes of a stored value, or an upper bound of them: raw for bytes, 8 for a KvU64, V8
 * serialization otherwise. Serializing through node:v8 to measure cost every push ~0.04 ms of
 * main-thread CPU (a tenth of a manifest push's JS, CPU profile of bench/events_bench.ts), so a
 * small plain value is bounded by walking it instead (bounds from V8's ValueSerializer format);
 * only a value whose bound nears the limits that matter is serialized to measure it exactly.
 */
export function valueSize(v: unknown): number {
  if (v instanceof Uint8Array) return v.byteLength;
  if (v instanceof Deno.KvU64) return 8;
  const bound = serializedBound(v, 0);
  if (bound >= 0 && bound <= EXACT_ABOVE) return bound + 3; // + the version header
  return serialize(v).byteLength;
}

/** Past this bound a value is measured exactly, so no limit refuses it for the bound's slack. */
const EXACT_ABOVE = 8 * 1024;

/**
 * An upper bound of V8's serialization of plain data (-1: something else, or deeper than a
 * walk should go). Strings count two bytes a character because V8 may hold even an ASCII
 * string two-byte and writes it as it holds it; a typed array carries its whole buffer.
 */
export function serializedBound(v: unknown, depth: number): number {
  switch (typeof v) {
    case "string":
      return 7 + 2 * v.length; // tag, padding, varint length, two-byte characters
    case "number":
      return 10; // tag + double (a Smi's zigzag varint is shorter)
    case "boolean":
    case "undefined":
      return 1;
    case "bigint":
      return 16 + Math.ceil(v.toString(16).length / 2);
    case "object": {
      if (v === null) return 1;
      if (depth > 16) return -1;
      if (Array.isArray(v)) {
        if (v.length > 4096) return -1;
        // Dense ('A' len … '$' props len) or sparse ('a' len, key and value pairs, '@' …):
        // 17 of framing, and up to 10 for each element's key in the sparse form.
        let n = 17;
        for (let i = 0; i < v.length; i++) {
          const e = serializedBound(v[i], depth + 1);
          if (e < 0) return -1;
          n += 10 + e;
        }
        return n;
      }
      if (ArrayBuffer.isView(v)) return 64 + v.buffer.byteLength;
      if (v instanceof Date) return 10;
      const proto = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) return -1;
      let n = 7; // 'o' … '{' varint count
      for (const k in v) {
        const e = serializedBound((v as Record<string, unknown>)[k], depth + 1);
        if (e < 0) return -1;
        n += 7 + 2 * k.length + e;
        if (n > EXACT_ABOVE) return -1;
      }
      return n;
    }
    default:
      return -1;
  }
}

/**
 * Tracks what one atomic commit would carry, so callers can fill a commit up to the limits
 * and start another. `reserve` keeps room for mutations the caller adds later.
 */
export class CommitBudget {
  checks = 0;
  mutations = 0;
  keyBytes = 0;
  totalBytes = 0;

  constructor(private readonly reserve = { checks: 0, mutations: 0, keyBytes: 0, totalBytes: 0 }) {}

  private fits(checks: number, mutations: number, keyBytes: number, totalBytes: number): boolean {
    const r = this.reserve;
    return this.checks + checks + r.checks <= KV_LIMITS.checks &&
      this.mutations + mutations + r.mutations <= KV_LIMITS.mutations &&
      this.keyBytes + keyBytes + r.keyBytes <= KV_LIMITS.keyBytes &&
      this.totalBytes + totalBytes + r.totalBytes <= KV_LIMITS.totalBytes;
  }

  /** Counts a check if it fits; false (nothing counted) otherwise. */
  check(key: Deno.KvKey): boolean {
    const k = keySize(key);
    if (!this.fits(1, 0, 0, k)) return false;
    this.checks++;
    this.totalBytes += k;
    return true;
  }

  /** Adds a check to `op`; past the limit it throws (a commit's checks are fixed by design). */
  checkOn(op: Deno.AtomicOperation, c: Deno.AtomicCheck): void {
    if (!this.check(c.key)) throw new KvLimitError("a commit needs more checks than KV allows");
    op.check(c);
  }

  /** Counts a set (or sum/min/max) of `value` under `key` if it fits. */
  set(key: Deno.KvKey, value: unknown): boolean {
    const k = keySize(key);
    const t = 2 * k + valueSize(value);
    if (!this.fits(0, 1, k, t)) return false;
    this.mutations++;
    this.keyBytes += k;
    this.totalBytes += t;
    return true;
  }

  delete(key: Deno.KvKey): boolean {
    const k = keySize(key);
    if (!this.fits(0, 1, 0, k)) return false;
    this.mutations++;
    this.totalBytes += k;
    return true;
  }

  /** Counts `ms` only if all of them fit (the caller adds them itself); false otherwise. */
  take(ms: PlannedMutation[]): boolean {
    let mutations = 0;
    let keyBytes = 0;
    let totalBytes = 0;
    for (const m of ms) {
      const k = keySize(m.key);
      mutations++;
      if (m.kind === "set") {
        keyBytes += k;
        totalBytes += 2 * k + valueSize(m.value);
      } else totalBytes += k;
    }
    if (!this.fits(0, mutations, keyBytes, totalBytes)) return false;
    this.mutations += mutations;
    this.keyBytes += keyBytes;
    this.totalBytes += totalBytes;
    return true;
  }

  /**
   * Whether `checks` and `ms` fit together, with `spare` checks left over; counts nothing (for a
   * caller that must add all of them or none to a commit another part is building).
   */
  fitsAll(checks: Deno.KvKey[], ms: PlannedMutation[], spare = 0): boolean {
    let keyBytes = 0;
    let totalBytes = 0;
    for (const k of checks) totalBytes += keySize(k);
    for (const m of ms) {
      const k = keySize(m.key);
      if (m.kind === "set") {
        keyBytes += k;
        totalBytes += 2 * k + valueSize(m.value);
      } else totalBytes += k;
    }
    return this.fits(checks.length + spare, ms.length, keyBytes, totalBytes);
  }

  /** Counts `ms` and adds them to `op` only if all of them fit; false (nothing added) otherwise. */
  addAll(op: Deno.AtomicOperation, ms: PlannedMutation[]): boolean {
    if (!this.take(ms)) return false;
    for (const m of ms) {
      if (m.kind === "set") op.set(m.key, m.value);
      else op.delete(m.key);
    }
    return true;
  }

  /** Whether this budget's commit is within every limit (for a caller that over-filled). */
  get within(): boolean {
    return this.fits(0, 0, 0, 0);
  }
}

/** A planned mutation, for code that splits a large change into budgeted commits. */
export type PlannedMutation =
  | { kind: "set"; key: Deno.KvKey; value: unknown }
  | { kind: "delete"; key: Deno.KvKey };

/**
 * Adds the jobs a write causes (event deliveries: a handful of small sets, never a check) to
 * that write's own commit.
 */
export function addJobs(op: Deno.AtomicOperation, jobs: PlannedMutation[]): Deno.AtomicOperation {
  for (const m of jobs) {
    if (m.kind === "set") op.set(m.key, m.value);
    else op.delete(m.key);
  }
  return op;
}

/** Adds `m` to `op` if `budget` has room; false (nothing added) otherwise. */
export function addPlanned(
  op: Deno.AtomicOperation,
  budget: CommitBudget,
  m: PlannedMutation,
): boolean {
  if (m.kind === "set") {
    if (!budget.set(m.key, m.value)) return false;
    op.set(m.key, m.value);
  } else {
    if (!budget.delete(m.key)) return false;
    op.delete(m.key);
  }
  return true;
}

/**
 * Applies independent mutations in as few commits as the limits allow (no checks: each one
 * stands alone, so the order of commits is the caller's safe order). `every` is added to each
 * commit (e.g. a version key that readers of the set check).
 */
export async function commitInBatches(
  kv: Deno.Kv,
  mutations: PlannedMutation[],
  every: PlannedMutation[] = [],
): Promise<void> {
  let i = 0;
  while (i < mutations.length) {
    const op = kv.atomic();
    const budget = new CommitBudget();
    if (!budget.addAll(op, every)) {
      throw new KvLimitError("per-commit mutations exceed KV's limits");
    }
    const start = i;
    while (i < mutations.length && addPlanned(op, budget, mutations[i])) i++;
    if (i === start) throw new KvLimitError("a single mutation exceeds KV's per-commit limits");
    if (!(await op.commit()).ok) throw new Error("batched KV write failed");
  }
}

export class KvLimitError extends Error {}

interface Recorded {
  checks: Deno.KvKey[];
  sets: [Deno.KvKey, unknown][];
  deletes: Deno.KvKey[];
}

/** What is wrong with a commit under KV_LIMITS, or null. */
export function describeViolation(r: Recorded): string | null {
  const problems: string[] = [];
  let keyBytes = 0;
  let total = 0;
  for (const k of r.checks) total += keySize(k);
  for (const k of r.deletes) total += keySize(k);
  for (const [k, v] of r.sets) {
    const ks = keySize(k);
    const vs = valueSize(v);
    if (ks > KV_LIMITS.keyMax) problems.push(`key of ${ks} bytes (${String(k[0])}/…)`);
    if (vs > KV_LIMITS.valueBytes) problems.push(`value of ${vs} bytes under ${String(k[0])}/…`);
    keyBytes += ks;
    total += 2 * ks + vs;
  }
  const mutations = r.sets.length + r.deletes.length;
  if (r.checks.length > KV_LIMITS.checks) {
    const kinds = [...new Set(r.checks.map((k) => String(k[0])))].join(",");
    problems.push(`${r.checks.length} checks (${kinds})`);
  }
  if (mutations > KV_LIMITS.mutations) problems.push(`${mutations} mutations`);
  if (keyBytes > KV_LIMITS.keyBytes) problems.push(`${keyBytes} bytes of keys`);
  if (total > KV_LIMITS.totalBytes) problems.push(`${total} bytes in all`);
  return problems.length ? problems.join("; ") : null;
}

/**
 * The same Kv, except that a commit (or set) past KV_LIMITS throws KvLimitError before it is
 * sent, after `report` saw it. Tests run every server and KV module under it.
 */
export function enforceKvLimits(kv: Deno.Kv, report: (msg: string) => void): Deno.Kv {
  const fail = (msg: string): never => {
    report(msg);
    throw new KvLimitError(`KV limit exceeded: ${msg}`);
  };
  // Patches the operation object itself (as withBusyRetry and instrumentKv do), so wrappers
  // compose in any order.
  const atomic = () => {
    const op = kv.atomic();
    const rec: Recorded = { checks: [], sets: [], deletes: [] };
    const check = op.check.bind(op);
    op.check = (...checks: Deno.AtomicCheck[]) => {
      for (const c of checks) rec.checks.push(c.key);
      check(...checks);
      return op;
    };
    const set = op.set.bind(op);
    op.set = (key: Deno.KvKey, value: unknown, o?: { expireIn?: number }) => {
      rec.sets.push([key, value]);
      set(key, value, o);
      return op;
    };
    const del = op.delete.bind(op);
    op.delete = (key: Deno.KvKey) => {
      rec.deletes.push(key);
      del(key);
      return op;
    };
    for (const name of ["sum", "min", "max"] as const) {
      const f = op[name].bind(op);
      op[name] = (key: Deno.KvKey, n: bigint) => {
        rec.sets.push([key, new Deno.KvU64(n)]);
        f(key, n);
        return op;
      };
    }
    const mutate = op.mutate.bind(op);
    op.mutate = (...ms: Deno.KvMutation[]) => {
      for (const m of ms) {
        if (m.type === "delete") rec.deletes.push(m.key);
        else rec.sets.push([m.key, "value" in m ? m.value : null]);
      }
      mutate(...ms);
      return op;
    };
    const enqueue = op.enqueue.bind(op);
    op.enqueue = (value: unknown, o?: Parameters<Deno.AtomicOperation["enqueue"]>[1]) => {
      rec.sets.push([["(enqueue)"], value]);
      enqueue(value, o);
      return op;
    };
    const commit = op.commit.bind(op);
    op.commit = () => {
      const v = describeViolation(rec);
      if (v) fail(v);
      return commit();
    };
    return op;
  };
  return new Proxy(kv, {
    get(target, prop) {
      if (prop === "atomic") return atomic;
      if (prop === "set") {
        return (key: Deno.KvKey, value: unknown, o?: { expireIn?: number }) => {
          const v = describeViolation({ checks: [], sets: [[key, value]], deletes: [] });
          if (v) fail(v);
          return target.set(key, value, o);
        };
      }
      const f = Reflect.get(target, prop, target);
      return typeof f === "function" ? f.bind(target) : f;
    },
  });
}

/** The marker a server prints for a commit past the limits or a key outside keys.ts; the test harness fails on it. */
export const KV_LIMIT_MARKER = "KV LIMIT VIOLATION";

/**
 * Under WHARF_STRICT_KV_LIMITS=1 (the test task sets it): `kv` with the limits enforced and
 * every key checked against keys.ts (key_guard.ts).
 */
export function strictIfRequested(kv: Deno.Kv): Deno.Kv {
  let on = false;
  try {
    on = Deno.env.get("WHARF_STRICT_KV_LIMITS") === "1";
  } catch { /* no env permission: off */ }
  if (!on) return kv;
  const report = (msg: string) => {
    console.error(`${KV_LIMIT_MARKER}: ${msg}\n${new Error().stack}`);
  };
  return enforceListedKeys(enforceKvLimits(kv, report), report);
}
