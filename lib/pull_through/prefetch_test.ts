import assert from "node:assert/strict";
import { AwaitingLayer, MAX_PER_MANIFEST, Prefetcher, type PrefetchItem } from "./prefetch.ts";

function gate() {
  let open!: () => void;
  const p = new Promise<void>((r) => (open = r));
  return { p, open };
}

Deno.test("Prefetcher: at most `concurrency` fills at once, in manifest order, each entry once", async () => {
  const started: string[] = [];
  const gates = new Map<string, ReturnType<typeof gate>>();
  let running = 0;
  let peak = 0;
  const p = new Prefetcher(
    async (item: PrefetchItem) => {
      started.push(item.digest);
      running++;
      peak = Math.max(peak, running);
      const g = gate();
      gates.set(item.digest, g);
      await g.p;
      running--;
    },
    2,
    100,
  );
  assert.equal(p.add("ns", ["a", "b", "c", "d"]), 4);
  assert.equal(p.add("ns", ["b", "e"]), 1, "b is already queued");
  assert.deepEqual(started, ["a", "b"]);
  gates.get("a")!.open();
  await new Promise((r) => setTimeout(r, 0));
  assert.deepEqual(started, ["a", "b", "c"]);
  for (const d of ["b", "c", "d", "e"]) {
    await new Promise((r) => setTimeout(r, 0));
    gates.get(d)?.open();
  }
  while (p.size > 0) {
    await new Promise((r) => setTimeout(r, 0));
    for (const g of gates.values()) g.open();
  }
  assert.deepEqual(started, ["a", "b", "c", "d", "e"]);
  assert.equal(peak, 2);
  // done entries may be queued again (a later manifest, after an eviction)
  assert.equal(p.add("ns", ["a"]), 1);
  p.close();
});

Deno.test("Prefetcher: the queue is bounded, per manifest and in all; a failed fill is dropped; close stops it", async () => {
  let calls = 0;
  const stop = gate();
  const p = new Prefetcher(
    async () => {
      calls++;
      await stop.p;
      throw new Error("upstream said no");
    },
    1,
    10,
  );
  const many = Array.from({ length: MAX_PER_MANIFEST + 50 }, (_, i) => `d${i}`);
  assert.equal(p.add("ns", many), 10, "10 queued (one of them then started)");
  assert.equal(p.size, 10);
  assert.equal(p.add("other", ["x"]), 1, "room for one more: the first entry is running");
  assert.equal(p.add("other", ["z"]), 0, "full");
  const q = new Prefetcher(() => Promise.resolve(), 1, 10_000);
  assert.equal(q.add("ns", many), MAX_PER_MANIFEST);
  p.close();
  stop.open();
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(calls, 1, "nothing queued runs after close");
  assert.equal(p.add("ns", ["y"]), 0, "closed");
  q.close();
});

Deno.test("AwaitingLayer: a layer GET takes its manifest's blobs once; other names, the config and old or forgotten manifests take nothing", async () => {
  const a = new AwaitingLayer(2, 50);
  a.add("ns", ["l1", "l2"], ["cfg", "l1", "l2"]);
  assert.equal(a.take("ns", "cfg"), null, "the config is not a layer");
  assert.equal(a.take("other", "l1"), null, "another namespace");
  assert.deepEqual(a.take("ns", "l2"), ["cfg", "l1", "l2"]);
  assert.equal(a.take("ns", "l1"), null, "once per manifest");
  a.add("ns", ["m1"], ["m1"]);
  a.add("ns", ["n1"], ["n1"]);
  a.add("ns", ["o1"], ["o1"]);
  assert.equal(a.take("ns", "m1"), null, "forgotten: only the 2 newest are kept");
  assert.deepEqual(a.take("ns", "n1"), ["n1"]);
  await new Promise((r) => setTimeout(r, 60));
  assert.equal(a.take("ns", "o1"), null, "older than the time limit");
});
