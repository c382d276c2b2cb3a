import assert from "node:assert/strict";
import {
  CommitBudget,
  commitInBatches,
  enforceKvLimits,
  keySize,
  KV_LIMITS,
  KvLimitError,
  type PlannedMutation,
} from "./kv_limits.ts";
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
