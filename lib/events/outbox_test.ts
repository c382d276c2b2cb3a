import assert from "node:assert/strict";
import { defaultConfig } from "../config/mod.ts";
import { deadLetter, OutboxDrainer, outboxEntry } from "./outbox.ts";
import type { WharfEvent } from "./event.ts";

function event(i: number): WharfEvent {
  return {
    id: crypto.randomUUID(),
    timestamp: new Date().toISOString(),
    kind: "manifest.push",
    namespace: "a/b",
    repository: "a",
    digest: null,
    reference: `t${i}`,
    tag: `t${i}`,
    actor: { username: null, id: null, client_ip: null },
  };
}

Deno.test({
  name: "outbox: two drainers share one webhook's outbox; each entry is delivered once",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const dir = await Deno.makeTempDir();
    const kv = await Deno.openKv(`${dir}/kv`);
    const got: string[] = [];
    const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (r) => {
      got.push((await r.json()).reference);
      return new Response(null, { status: 204 });
    });
    const cfg = defaultConfig();
    cfg.global.jobQueue.pollIntervalMs = 20;
    cfg.eventWebhooks = [{
      name: "w",
      url: `http://127.0.0.1:${(server.addr as Deno.NetAddr).port}/`,
      events: [],
      token: null,
      timeoutMs: 2000,
      maxRetries: 3,
      repositoryFilter: [],
      policy: "async",
    }];
    try {
      for (let i = 0; i < 300; i += 100) {
        const op = kv.atomic();
        for (let j = i; j < i + 100; j++) {
          const e = outboxEntry(cfg.eventWebhooks[0], event(j), Date.now());
          op.set(e.key, e.value);
        }
        await op.commit();
      }
      const a = new OutboxDrainer(kv, cfg, "a");
      const b = new OutboxDrainer(kv, cfg, "b");
      a.start();
      b.start();
      const end = Date.now() + 20_000;
      while (got.length < 300 && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 200));
      await a.stop();
      await b.stop();
      assert.equal(got.length, 300);
      assert.equal(new Set(got).size, 300, "no entry delivered twice");
      let left = 0;
      for await (const _ of kv.list({ prefix: ["evq"] })) left++;
      assert.equal(left, 0, "delivered entries are gone");
    } finally {
      await server.shutdown();
      kv.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test("outbox: a dead letter is a job record of the events queue", () => {
  const h = {
    name: "w",
    url: "http://x/",
    events: [],
    token: null,
    timeoutMs: 1,
    maxRetries: 0,
    repositoryFilter: [],
    policy: "async" as const,
  };
  const e = outboxEntry(h, event(1), 1000);
  assert.equal(e.value.max_attempts, 1);
  const d = deadLetter({ ...e.value, attempts: 1 }, "webhook w answered 500", 2000);
  assert.equal(d.kind, "deliver-event");
  assert.deepEqual(d.payload, { webhook: "w", event: e.value.event });
  assert.equal(d.failed_at, 2000);
  assert.equal(d.last_error, "webhook w answered 500");
});

Deno.test({
  name:
    "outbox: a batch holds its lease for one lease_secs term at a time, renewed while a slow receiver answers",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const dir = await Deno.makeTempDir();
    const kv = await Deno.openKv(`${dir}/kv`);
    const got: string[] = [];
    let slow = true;
    const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (r) => {
      const ref = (await r.json()).reference;
      // The first delivery outlasts two lease terms: without renewals the other drainer would
      // take the outbox over and deliver the batch a second time.
      if (slow) {
        slow = false;
        await new Promise((res) => setTimeout(res, 2500));
      }
      got.push(ref);
      return new Response(null, { status: 204 });
    });
    const cfg = defaultConfig();
    cfg.global.jobQueue.pollIntervalMs = 20;
    cfg.global.jobQueue.leaseSecs = 1;
    cfg.eventWebhooks = [{
      name: "w",
      url: `http://127.0.0.1:${(server.addr as Deno.NetAddr).port}/`,
      events: [],
      token: null,
      timeoutMs: 10_000,
      maxRetries: 3,
      repositoryFilter: [],
      policy: "async",
    }];
    const a = new OutboxDrainer(kv, cfg, "a");
    const b = new OutboxDrainer(kv, cfg, "b");
    try {
      const op = kv.atomic();
      for (let j = 0; j < 5; j++) {
        const e = outboxEntry(cfg.eventWebhooks[0], event(j), Date.now());
        op.set(e.key, e.value);
      }
      await op.commit();
      a.start();
      await new Promise((r) => setTimeout(r, 300));
      b.start();
      // Mid-batch the lease ends within one term: a process killed now holds the webhook up
      // for at most that (it covered the whole batch at its slowest: ~2 minutes).
      let longest = 0;
      const watchUntil = Date.now() + 2000;
      while (Date.now() < watchUntil) {
        const l = (await kv.get<{ until: number }>(["evlease", "w"])).value;
        if (l) longest = Math.max(longest, l.until - Date.now());
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.ok(longest > 0, "a batch was under way");
      assert.ok(longest <= 1100, `the lease ran ${longest} ms ahead`);
      const end = Date.now() + 15_000;
      while (got.length < 5 && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 500));
      assert.deepEqual([...got].sort(), ["t0", "t1", "t2", "t3", "t4"], "each delivered once");
    } finally {
      await a.stop();
      await b.stop();
      await server.shutdown();
      kv.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
