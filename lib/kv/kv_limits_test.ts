import assert from "node:assert/strict";
import {
  CommitBudget,
  commitInBatches,
  enforceKvLimits,
  keySize,
  KV_LIMITS,
  KvLimitError,
  type PlannedMutation,
  serializedBound,
  valueSize,
} from "./kv_limits.ts";
import { serialize } from "node:v8";
import { withBusyRetry } from "./kv_busy.ts";
import { instrumentKv } from "./instrumented_kv.ts";

async function tempKv(): Promise<
  { kv: Deno.Kv; raw: Deno.Kv; seen: string[]; done: () => Promise<void> }
> {
  const dir = await Deno.makeTempDir();
  const raw = await Deno.openKv(`${dir}/kv`);
  const seen: string[] = [];
  const kv = instrumentKv(withBusyRetry(enforceKvLimits(raw, (m) => seen.push(m))), () => {});
  return {
    kv,
    raw,
    seen,
    done: async () => {
      raw.close();
      await Deno.remove(dir, { recursive: true });
    },
  };
}

Deno.test("keySize matches Deno KV's own accounting at its 80 KiB key limit", async () => {
  const { raw, done } = await tempKv();
  try {
    const big = "x".repeat(1000);
    const key = (i: number) => ["k", big, i];
    assert.equal(keySize(key(0)), 3 + 1002 + 9);
    const fit = Math.floor(KV_LIMITS.keyBytes / keySize(key(0)));
    const ok = raw.atomic();
    for (let i = 0; i < fit; i++) ok.set(key(i), 1);
    assert.equal((await ok.commit()).ok, true);
    const over = raw.atomic();
    for (let i = 0; i <= fit; i++) over.set(key(i), 1);
    await assert.rejects(over.commit(), /Total key size too large/);
    assert.equal(keySize(["a\0b"]), 2 + 3 + 1, "NUL is escaped");
  } finally {
    await done();
  }
});

Deno.test("the enforcing wrapper refuses 11 checks, composes with the other wrappers", async () => {
  const { kv, seen, done } = await tempKv();
  try {
    const op = kv.atomic();
    for (let i = 0; i < 11; i++) op.check({ key: ["c", i], versionstamp: null });
    op.set(["x"], 1);
    await assert.rejects(op.commit(), KvLimitError);
    assert.match(seen[0], /11 checks \(c\)/);
    assert.equal((await kv.get(["x"])).value, null, "nothing was written");
    const ok = kv.atomic();
    for (let i = 0; i < 10; i++) ok.check({ key: ["c", i], versionstamp: null });
    assert.equal((await ok.set(["x"], 1).commit()).ok, true);
    await assert.rejects(kv.set(["big"], new Uint8Array(KV_LIMITS.valueBytes + 1)), KvLimitError);
  } finally {
    await done();
  }
});

Deno.test("CommitBudget and commitInBatches keep every commit within the limits", async () => {
  const { kv, seen, done } = await tempKv();
  try {
    const b = new CommitBudget({ checks: 2, mutations: 0, keyBytes: 0, totalBytes: 0 });
    for (let i = 0; i < 8; i++) assert.ok(b.check(["c", i]));
    assert.equal(b.check(["c", 9]), false, "two checks are reserved");
    const ns = "n".repeat(255);
    const muts: PlannedMutation[] = [];
    for (let i = 0; i < 3000; i++) {
      muts.push({ kind: "set", key: ["bref", ns, `d${i}`], value: true });
    }
    await commitInBatches(kv, muts);
    let n = 0;
    for await (const _ of kv.list({ prefix: ["bref", ns] })) n++;
    assert.equal(n, 3000);
    await commitInBatches(kv, muts.map((m) => ({ kind: "delete", key: m.key })));
    for await (const _ of kv.list({ prefix: ["bref", ns] })) assert.fail("deleted");
    assert.deepEqual(seen, []);
  } finally {
    await done();
  }
});

/** A seeded generator, so a failure names a value that can be made again. */
function rng(seed: number) {
  return () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
}

function randomValue(r: () => number, depth: number): unknown {
  const pick = Math.floor(r() * (depth > 3 ? 7 : 11));
  const str = () => {
    const alphabets = ["abc-_/:.", "éüßÿ", "€中文ह", "😀🚢"];
    const a = alphabets[Math.floor(r() * alphabets.length)];
    const chars = [...a];
    let s = "";
    for (let i = Math.floor(r() * 40); i > 0; i--) s += chars[Math.floor(r() * chars.length)];
    // A slice of a two-byte string may stay two-byte even when it holds only ASCII.
    return r() < 0.3 ? ("€" + s).slice(1) : s;
  };
  switch (pick) {
    case 0:
      return str();
    case 1:
      return [0, -1, 2 ** 31, -(2 ** 53), 1.5, NaN, Infinity, Math.floor(r() * 1e6)][
        Math.floor(r() * 8)
      ];
    case 2:
      return r() < 0.5;
    case 3:
      return null;
    case 4:
      return undefined;
    case 5:
      return BigInt(Math.floor(r() * 1e15)) * 10n ** BigInt(Math.floor(r() * 30));
    case 6:
      return new Date(Math.floor(r() * 2e12));
    case 7: {
      const buf = new Uint8Array(Math.floor(r() * 300));
      return r() < 0.5 ? buf : buf.subarray(Math.floor(buf.length / 3));
    }
    case 8: {
      const a: unknown[] = [];
      for (let i = Math.floor(r() * 6); i > 0; i--) a.push(randomValue(r, depth + 1));
      if (r() < 0.2) a[a.length + 3] = 1; // holes: V8 may write it sparse
      return a;
    }
    default: {
      const o: Record<string, unknown> = r() < 0.2 ? Object.create(null) : {};
      for (let i = Math.floor(r() * 6); i > 0; i--) {
        o[r() < 0.2 ? String(Math.floor(r() * 100)) : str() || "k"] = randomValue(r, depth + 1);
      }
      return o;
    }
  }
}

Deno.test("valueSize never counts a value smaller than V8 serializes it", async () => {
  const r = rng(42);
  for (let i = 0; i < 3000; i++) {
    const v = randomValue(r, 0);
    // KV stores a top-level Uint8Array raw, anything else V8-serialized.
    const exact = v instanceof Uint8Array ? v.byteLength : serialize(v).byteLength;
    assert.ok(valueSize(v) >= exact, `value ${i}: ${valueSize(v)} < ${exact}`);
  }
  // Deno KV serializes a typed array with its whole buffer (node:v8 writes only the view).
  const big = new Uint8Array(4096);
  assert.ok(valueSize({ b: big.subarray(0, 8) }) >= 4096);
  // Values KV cannot take, or not plainly, are measured by serializing them.
  assert.equal(serializedBound(new Map([[1, 2]]), 0), -1);
  assert.equal(serializedBound(new (class X {})(), 0), -1);
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  assert.equal(valueSize(cyclic), serialize(cyclic).byteLength);
  // Past the bound's range the size is exact, so a value near 64 KiB is judged by its real size.
  const large = { s: "a".repeat(40_000), n: 1 };
  assert.equal(valueSize(large), serialize(large).byteLength);
  // A bound that says a value fits is one real KV accepts.
  const { raw, done } = await tempKv();
  try {
    const near = { s: "x".repeat(KV_LIMITS.valueBytes - 64) };
    assert.ok(valueSize(near) <= KV_LIMITS.valueBytes);
    await raw.set(["near"], near);
  } finally {
    await done();
  }
});

Deno.test("valueSize bounds a typical record within three times its size", () => {
  const ev = {
    id: crypto.randomUUID(),
    webhook: "audit",
    event: {
      id: crypto.randomUUID(),
      timestamp: new Date().toISOString(),
      kind: "manifest.push",
      namespace: "team/app",
      repository: "team",
      digest: `sha256:${"a".repeat(64)}`,
      reference: "v1",
      tag: "v1",
      actor: { name: "alice", kind: "user", ip: "127.0.0.1" },
    },
    attempts: 0,
    max_attempts: 6,
    created_at: Date.now(),
  };
  const exact = serialize(ev).byteLength;
  assert.ok(valueSize(ev) >= exact && valueSize(ev) <= 3 * exact, `${valueSize(ev)} vs ${exact}`);
});
