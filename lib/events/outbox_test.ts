import assert from "node:assert/strict";
import { defaultConfig } from "../config/mod.ts";
import { deadLetter, OutboxDrainer, outboxEntry } from "./outbox.ts";
import type { WharfEvent } from "./event.ts";
import type { Config, EventWebhookConfig } from "../config/mod.ts";

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

/** An async webhook "w" at `url`, for a drainer to deliver to. */
function webhook(url: string, timeoutMs: number, maxRetries: number): EventWebhookConfig {
  return {
    name: "w",
    url,
    events: [],
    token: null,
    timeoutMs,
    maxRetries,
    repositoryFilter: [],
    policy: "async",
  };
}

/**
 * A KV file, a receiver on a free loopback port (`answer` sees each delivery's reference before
 * its 204) and a config with one async webhook "w" to it polled every 20 ms; all gone afterwards.
 */
async function withOutbox(
  answer: (reference: string) => Promise<void> | void,
  timeoutMs: number,
  fn: (kv: Deno.Kv, cfg: Config) => Promise<void>,
): Promise<void> {
  const dir = await Deno.makeTempDir();
  const kv = await Deno.openKv(`${dir}/kv`);
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (r) => {
    await answer((await r.json()).reference);
    return new Response(null, { status: 204 });
  });
  const cfg = defaultConfig();
  cfg.global.jobQueue.pollIntervalMs = 20;
  const url = `http://127.0.0.1:${(server.addr as Deno.NetAddr).port}/`;
  cfg.eventWebhooks = [webhook(url, timeoutMs, 3)];
  try {
    await fn(kv, cfg);
  } finally {
    await server.shutdown();
    kv.close();
    await Deno.remove(dir, { recursive: true });
  }
}

/** `n` due entries from `from` on, in one commit. */
async function addEntries(kv: Deno.Kv, cfg: Config, from: number, n: number): Promise<void> {
  const op = kv.atomic();
  for (let j = from; j < from + n; j++) {
    const e = outboxEntry(cfg.eventWebhooks[0], event(j), Date.now());
    op.set(e.key, e.value);
  }
  await op.commit();
}

Deno.test({
  name: "outbox: two drainers share one webhook's outbox; each entry is delivered once",
  sanitizeOps: false,
  sanitizeResources: false,
  fn: async () => {
    const got: string[] = [];
    await withOutbox((ref) => void got.push(ref), 2000, async (kv, cfg) => {
      for (let i = 0; i < 300; i += 100) await addEntries(kv, cfg, i, 100);
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
    });
  },
});

Deno.test("outbox: a dead letter is a job record of the events queue", () => {
  const h = webhook("http://x/", 1, 0);
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
    const got: string[] = [];
    let slow = true;
    const answer = async (ref: string) => {
      // The first delivery outlasts two lease terms: without renewals the other drainer would
      // take the outbox over and deliver the batch a second time.
      if (slow) {
        slow = false;
        await new Promise((res) => setTimeout(res, 2500));
      }
      got.push(ref);
    };
    await withOutbox(answer, 10_000, async (kv, cfg) => {
      cfg.global.jobQueue.leaseSecs = 1;
      const a = new OutboxDrainer(kv, cfg, "a");
      const b = new OutboxDrainer(kv, cfg, "b");
      try {
        await addEntries(kv, cfg, 0, 5);
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
      }
    });
  },
});
