// Two SharedBuckets on one KV file stand for two processes: what they admit together, what
// they write, and how many KV operations a busy bucket costs.
import assert from "node:assert/strict";
import { join } from "node:path";
import { SharedBuckets } from "./shared_buckets.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const B = { periodMs: 60_000, capacity: 10 };

async function withKv(fn: (kv: Deno.Kv) => Promise<void>) {
  const dir = await Deno.makeTempDir({ prefix: "wharf-ratelimit-" });
  const kv = await Deno.openKv(join(dir, "kv"));
  try {
    await fn(kv);
  } finally {
    kv.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("two processes at once admit at most 2 × capacity; every take is charged", async () => {
  await withKv(async (kv) => {
    const a = new SharedBuckets(kv, () => 50);
    const b = new SharedBuckets(kv, () => 50);
    const vs = await Promise.all(
      Array.from({ length: 60 }, (_, i) => (i % 2 ? a : b).take("*", "pulls", "id:x", B)),
    );
    const ok = vs.filter((v) => v.ok).length;
    assert.ok(ok >= 10 && ok <= 20, `admitted ${ok}`);
    await Promise.all([a.flush(), b.flush()]);
    const stored = (await kv.get<number>(["ratelimit", "*", "pulls", "id:x"])).value!;
    // Every admitted take moved the stored TAT one period on: the debt is on record.
    assert.ok(stored - Date.now() >= (ok - 1) * B.periodMs, `stored ${stored}`);
    await sleep(60);
    assert.equal((await a.take("*", "pulls", "id:x", B)).ok, false);
    assert.equal((await b.take("*", "pulls", "id:x", B)).ok, false);
  });
});

Deno.test("sequential takes on alternating processes are exact", async () => {
  await withKv(async (kv) => {
    const a = new SharedBuckets(kv, () => 20);
    const b = new SharedBuckets(kv, () => 20);
    const left: number[] = [];
    for (let i = 0; i < 12; i++) {
      const v = await (i % 2 ? a : b).take("*", "pulls", "id:y", B);
      left.push(v.ok ? v.remaining : -1);
      await sleep(70);
    }
    assert.deepEqual(left, [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, -1, -1]);
  });
});

Deno.test("a busy bucket costs a few KV operations per interval, not per take", async () => {
  await withKv(async (kv) => {
    const a = new SharedBuckets(kv, () => 100);
    const big = { periodMs: 0.001, capacity: 1e9 };
    const until = Date.now() + 550;
    let n = 0;
    while (Date.now() < until) {
      await a.take("*", "requests", "id:z", big);
      n++;
      if (n % 200 === 0) await sleep(1);
    }
    await a.flush();
    const ops = a.kvCounts.gets + a.kvCounts.commits;
    // ~6 intervals: a load and a settle (get + commit) each, whatever n is.
    assert.ok(n > 1000, `takes ${n}`);
    assert.ok(ops <= 25, `${ops} KV operations for ${n} takes`);
  });
});

Deno.test("settles commit at most 10 buckets (checks) each", async () => {
  await withKv(async (kv) => {
    const a = new SharedBuckets(kv, () => 10_000);
    for (let i = 0; i < 25; i++) await a.take("*", "pulls", `ip:10.0.0.${i}`, B);
    const commitsBefore = a.kvCounts.commits;
    await a.flush();
    assert.equal(a.kvCounts.commits - commitsBefore, 3);
    let keys = 0;
    for await (const _ of kv.list({ prefix: ["ratelimit"] })) keys++;
    assert.equal(keys, 25);
  });
});

Deno.test("settles racing on one bucket: the loser reads again, both processes' takes count", async () => {
  await withKv(async (kv) => {
    const a = new SharedBuckets(kv, () => 10_000);
    const b = new SharedBuckets(kv, () => 10_000);
    const big = { periodMs: 1000, capacity: 1000 };
    for (let i = 0; i < 5; i++) await a.take("*", "pulls", "id:r", big);
    for (let i = 0; i < 7; i++) await b.take("*", "pulls", "id:r", big);
    await Promise.all([a.flush(), b.flush()]);
    assert.equal(a.kvCounts.conflicts + b.kvCounts.conflicts, 1);
    const stored = (await kv.get<number>(["ratelimit", "*", "pulls", "id:r"])).value!;
    const ahead = stored - Date.now();
    // 12 takes from a full bucket: 12 periods ahead of the first take (within the test's runtime).
    assert.ok(ahead > 11_000 && ahead <= 12_000, `TAT ${ahead} ms ahead`);
  });
});

Deno.test("a KV that fails: decisions go on from this process's view, errors reported", async () => {
  await withKv(async (real) => {
    const broken = new Proxy(real, {
      get(t, p) {
        if (p === "getMany" || p === "atomic" || p === "get") {
          return () => {
            throw new Error("kv down");
          };
        }
        return Reflect.get(t, p);
      },
    });
    const errors: unknown[] = [];
    const a = new SharedBuckets(broken, () => 20, (e) => errors.push(e));
    const small = { periodMs: 60_000, capacity: 2 };
    const oks = [];
    for (let i = 0; i < 3; i++) oks.push((await a.take("*", "pulls", "id:k", small)).ok);
    assert.deepEqual(oks, [true, true, false], "still limited, per process");
    await a.flush();
    assert.ok(errors.length >= 2, `errors ${errors.length}`);
    assert.match(String(errors[0]), /kv down/);
  });
});

Deno.test("a stale bucket is read once for all the requests that arrive while it loads", async () => {
  await withKv(async (kv) => {
    const a = new SharedBuckets(kv, () => 10_000);
    const big = { periodMs: 1000, capacity: 1000 };
    const vs = await Promise.all(
      Array.from({ length: 100 }, () => a.take("*", "pulls", "id:one", big)),
    );
    assert.equal(vs.filter((v) => v.ok).length, 100);
    assert.equal(a.kvCounts.gets, 1, "one read for 100 concurrent requests");
    // Fresh now: decided without a promise and without a read.
    assert.equal(a.prepare([{ scope: "*", cls: "pulls", who: "id:one", bucket: big }]), null);
    assert.equal(a.takeNow("*", "pulls", "id:one", big).remaining, 899);
    assert.equal(a.kvCounts.gets, 1);
  });
});

Deno.test("stale buckets of many identities share getManys of at most 10 keys", async () => {
  await withKv(async (kv) => {
    let widest = 0;
    const counting = new Proxy(kv, {
      get(t, p) {
        if (p === "getMany") {
          return (keys: Deno.KvKey[]) => {
            widest = Math.max(widest, keys.length);
            return t.getMany(keys);
          };
        }
        const v = Reflect.get(t, p);
        return typeof v === "function" ? v.bind(t) : v;
      },
    });
    const a = new SharedBuckets(counting, () => 10_000);
    const vs = await Promise.all(
      Array.from({ length: 60 }, (_, i) => a.take("*", "pulls", `ip:10.0.1.${i}`, B)),
    );
    assert.equal(vs.filter((v) => v.ok).length, 60);
    // Two reads start at once (one key each); the 58 buckets queued behind them share six.
    assert.ok(a.kvCounts.gets <= 8, `${a.kvCounts.gets} reads for 60 identities`);
    assert.ok(widest <= 10, `a getMany of ${widest} keys`);
  });
});

Deno.test("batched reads keep two processes within 2 × capacity per identity", async () => {
  await withKv(async (kv) => {
    const a = new SharedBuckets(kv, () => 50);
    const b = new SharedBuckets(kv, () => 50);
    const small = { periodMs: 60_000, capacity: 3 };
    // 20 identities, 10 takes each, at once, alternating between the processes.
    const vs = await Promise.all(
      Array.from(
        { length: 200 },
        (_, i) =>
          (i % 2 ? a : b).take("*", "pulls", `id:${i % 20}`, small).then((v) => ({
            who: i % 20,
            ok: v.ok,
          })),
      ),
    );
    for (let w = 0; w < 20; w++) {
      const ok = vs.filter((v) => v.who === w && v.ok).length;
      assert.ok(ok >= 3 && ok <= 6, `identity ${w}: admitted ${ok}`);
    }
    assert.ok(a.kvCounts.gets + b.kvCounts.gets < 40, "fewer reads than buckets × processes");
    await Promise.all([a.flush(), b.flush()]);
    await sleep(60);
    for (let w = 0; w < 20; w++) {
      assert.equal((await a.take("*", "pulls", `id:${w}`, small)).ok, false, `a, ${w}`);
      assert.equal((await b.take("*", "pulls", `id:${w}`, small)).ok, false, `b, ${w}`);
    }
  });
});
