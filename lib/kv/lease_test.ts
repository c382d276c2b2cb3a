import assert from "node:assert/strict";
import { K } from "./keys.ts";
import { openMetadata } from "./open.ts";
import {
  holdWhileRunning,
  keepRenewed,
  type LeaseFormat,
  LeaseLost,
  Leases,
  type LeaseState,
  UNTIL_FORMAT,
} from "./lease.ts";

/** A KV file in a temporary directory, as a process opens one. */
async function withKv(fn: (kv: Deno.Kv, path: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-lease-" });
  const kv = await openMetadata(`${dir}/meta.kv`);
  try {
    await fn(kv, `${dir}/meta.kv`);
  } finally {
    kv.close();
    await Deno.remove(dir, { recursive: true });
  }
}

const KEY = K.syncLease("library/alpine");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A clock a test moves by hand. */
function clock(start = 1_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
}

Deno.test("lease: two holders, one wins; the winner takes it again, the other hears who holds it", () =>
  withKv(async (kv) => {
    const c = clock();
    const leases = new Leases(kv, UNTIL_FORMAT, c.now);
    const a = await leases.take(KEY, "a", 10_000);
    assert.ok(a.ok);
    assert.deepEqual((await kv.get(KEY)).value, { holder: "a", until: c.now() + 10_000 });
    const b = await leases.take(KEY, "b", 10_000);
    assert.equal(b.ok, false);
    assert.ok(!b.ok && b.held.holder === "a" && b.held.until === c.now() + 10_000);
    assert.deepEqual(b.ok ? null : b.held.value, { holder: "a", until: c.now() + 10_000 });
    c.advance(5_000);
    assert.ok((await leases.take(KEY, "a", 10_000)).ok, "its own live lease: taken again");
    assert.equal((await leases.holder(KEY))?.until, c.now() + 10_000);
  }));

Deno.test("lease: takers racing on one key (two processes' handles): exactly one holds it", () =>
  withKv(async (kv, path) => {
    const other = await openMetadata(path);
    try {
      for (let round = 0; round < 5; round++) {
        const key = K.syncLease(`race-${round}`);
        const takes = await Promise.all(
          ["a", "b", "c", "d"].map((h, i) =>
            new Leases(i % 2 ? other : kv, UNTIL_FORMAT).take(key, h, 10_000)
          ),
        );
        const won = takes.filter((t) => t.ok);
        assert.equal(won.length, 1, `round ${round}: ${JSON.stringify(takes.map((t) => t.ok))}`);
        const holder = won[0].ok ? won[0].lease.holder : "";
        assert.equal((await kv.get<LeaseState>(key)).value?.holder, holder);
        for (const t of takes) if (!t.ok) assert.equal(t.held.holder, holder);
      }
    } finally {
      other.close();
    }
  }));

Deno.test("lease: a lease run out is taken over; its old holder can neither renew nor release it", () =>
  withKv(async (kv) => {
    const c = clock();
    const leases = new Leases(kv, UNTIL_FORMAT, c.now);
    const a = await leases.take(KEY, "a", 1_000);
    assert.ok(a.ok);
    c.advance(999);
    assert.equal((await leases.take(KEY, "b", 1_000)).ok, false, "still live");
    c.advance(2);
    assert.equal(await leases.holder(KEY), null, "run out: nobody holds it");
    const b = await leases.take(KEY, "b", 1_000);
    assert.ok(b.ok, "taken over");
    assert.equal(await a.lease.renew(), false, "the old holder's renewal finds it lost");
    const before = await kv.get(KEY);
    await a.lease.release();
    const after = await kv.get(KEY);
    assert.equal(after.versionstamp, before.versionstamp, "a non-holder's release does nothing");
    assert.equal((await leases.holder(KEY))?.holder, "b");
    // a release added to a commit is checked against the lease as its holder last wrote it
    const op = leases.releaseInto(kv.atomic(), a.lease).set(K.syncLease("other"), 1);
    assert.equal((await op.commit()).ok, false);
    assert.equal((await kv.get(K.syncLease("other"))).value, null);
    await b.lease.release();
    assert.equal((await kv.get(KEY)).value, null, "its holder's release deletes the key");
  }));

Deno.test("lease: a renewal moves the end and the versionstamp; a release in a commit lands with it", () =>
  withKv(async (kv) => {
    const c = clock();
    // the outbox's layout: a release leaves the holder with an end long past
    const leases = new Leases(kv, {
      ...UNTIL_FORMAT,
      released: (holder: string) => ({ holder, until: 0 }),
    }, c.now);
    const a = await leases.take(KEY, "a", 1_000);
    assert.ok(a.ok);
    const vs = a.lease.versionstamp;
    c.advance(600);
    assert.ok(await a.lease.renew());
    assert.notEqual(a.lease.versionstamp, vs);
    assert.deepEqual(a.lease.value, { holder: "a", until: c.now() + 1_000 });
    c.advance(600);
    assert.equal((await leases.take(KEY, "b", 1_000)).ok, false, "renewed: still a's");
    const op = leases.releaseInto(kv.atomic(), a.lease).set(K.syncLease("other"), 1);
    assert.ok((await op.commit()).ok);
    assert.deepEqual((await kv.get(KEY)).value, { holder: "a", until: 0 });
    assert.equal(await leases.holder(KEY), null);
    assert.ok((await leases.take(KEY, "b", 1_000)).ok);
  }));

Deno.test("lease: a layout keeping the last renewal reads its end with the term", () =>
  withKv(async (kv) => {
    const TERM = 60_000;
    const at: LeaseFormat<{ at: number; holder: string }> = {
      write: (holder, now) => ({ at: now, holder }),
      read: (v) => ({ holder: v.holder, until: v.at + TERM }),
    };
    const c = clock();
    const leases = new Leases(kv, at, c.now);
    // as an older process left it: renewed 59 s ago, then one renewed an hour ago
    await kv.set(KEY, { at: c.now() - 59_000, holder: "old" });
    assert.equal((await leases.take(KEY, "new", TERM)).ok, false);
    await kv.set(KEY, { at: c.now() - 3_600_000, holder: "old" });
    const t = await leases.take(KEY, "new", TERM);
    assert.ok(t.ok);
    assert.deepEqual((await kv.get(KEY)).value, { at: c.now(), holder: "new" });
    // values no lease reads as held: none, a bare number, no holder, no readable time
    for (const v of [7, { at: c.now() }, { holder: "x" }, { holder: "x", at: "soon" }]) {
      await kv.set(KEY, v);
      assert.equal(await leases.holder(KEY), null, JSON.stringify(v));
      assert.ok((await leases.take(KEY, "new", TERM)).ok, JSON.stringify(v));
    }
  }));

Deno.test("holdWhileRunning: renews while the work runs, then releases", () =>
  withKv(async (kv) => {
    const leases = new Leases(kv, UNTIL_FORMAT);
    const t = await leases.take(KEY, "a", 600);
    assert.ok(t.ok);
    const r = await holdWhileRunning(t.lease, async (signal) => {
      await sleep(1500); // 2.5 terms: without renewals another holder could take it meanwhile
      assert.equal((await leases.take(KEY, "b", 600)).ok, false);
      assert.equal(signal.aborted, false);
      return "done";
    });
    assert.equal(r, "done");
    assert.equal((await kv.get(KEY)).value, null, "released");
  }));

Deno.test("holdWhileRunning: a lost lease aborts the work's signal", () =>
  withKv(async (kv) => {
    const c = clock(Date.now());
    const mine = new Leases(kv, UNTIL_FORMAT);
    const t = await mine.take(KEY, "a", 300);
    assert.ok(t.ok);
    let reason: unknown;
    await holdWhileRunning(t.lease, async (signal) => {
      // Another process whose clock says a's lease ran out takes it over (as after a stall).
      c.advance(1_000);
      assert.ok((await new Leases(kv, UNTIL_FORMAT, c.now).take(KEY, "b", 60_000)).ok);
      await new Promise((r) => signal.addEventListener("abort", r, { once: true }));
      reason = signal.reason;
    }, { name: "test" });
    assert.ok(reason instanceof LeaseLost);
    assert.equal((reason as Error).message, "test lease lost");
    assert.equal((await mine.holder(KEY))?.holder, "b", "the end released nothing of b's");
  }));

Deno.test("holdWhileRunning: the work's error is its own, the lease is released anyway", () =>
  withKv(async (kv) => {
    const leases = new Leases(kv, UNTIL_FORMAT);
    const t = await leases.take(KEY, "a", 10_000);
    assert.ok(t.ok);
    const stop = new AbortController();
    await assert.rejects(
      holdWhileRunning(t.lease, (signal) => {
        stop.abort(new Error("stopping"));
        assert.equal(signal.reason.message, "stopping", "a caller's signal aborts the work too");
        return Promise.reject(new Error("boom"));
      }, { signal: stop.signal }),
      /boom/,
    );
    assert.equal((await kv.get(KEY)).value, null);
  }));

Deno.test("keepRenewed: no tick queued behind a slow renewal; stop waits for the one under way", async () => {
  let calls = 0;
  let inFlight = 0;
  let most = 0;
  const r = keepRenewed(async () => {
    calls++;
    most = Math.max(most, ++inFlight);
    await sleep(120);
    inFlight--;
    return true;
  }, 20);
  await sleep(300);
  await r.stop();
  assert.equal(inFlight, 0, "stop waited for the renewal under way");
  assert.equal(most, 1);
  assert.ok(calls >= 1 && calls <= 3, `${calls} renewals in 300 ms at 120 ms each`);
  const after = calls;
  await sleep(60);
  assert.equal(calls, after, "none after stop");
  assert.equal(r.signal.aborted, false);
});

Deno.test("keepRenewed: a failed renewal is reported and tried again; false ends the loop", async () => {
  const answers: (boolean | Error)[] = [new Error("kv down"), true, false, true];
  const errors: unknown[] = [];
  let calls = 0;
  const r = keepRenewed(
    () => {
      const a = answers[calls++];
      return a instanceof Error ? Promise.reject(a) : Promise.resolve(a);
    },
    10,
    { onError: (e) => errors.push(e) },
  );
  await new Promise((res) => r.signal.addEventListener("abort", res, { once: true }));
  await sleep(50);
  await r.stop();
  assert.equal(calls, 3, "no renewal after the one that found it lost");
  assert.equal(errors.length, 1);
  assert.ok(r.signal.reason instanceof LeaseLost);
});
