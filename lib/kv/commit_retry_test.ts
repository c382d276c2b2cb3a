import assert from "node:assert/strict";
import { commitRetryCounts, commitWithRetry } from "./commit_retry.ts";

async function withKv(fn: (kv: Deno.Kv) => Promise<void>): Promise<void> {
  const kv = await Deno.openKv(":memory:");
  try {
    await fn(kv);
  } finally {
    kv.close();
  }
}

Deno.test("commitWithRetry re-reads and rebuilds until its check holds", () =>
  withKv(async (kv) => {
    await kv.set(["n"], 0);
    let attempts = 0;
    const value = await commitWithRetry("test.increment", async () => {
      attempts++;
      const cur = await kv.get<number>(["n"]);
      // A racing writer moves the key under the first two attempts.
      if (attempts <= 2) await kv.set(["n"], cur.value! + 10);
      return { op: kv.atomic().check(cur).set(["n"], cur.value! + 1), value: cur.value! + 1 };
    });
    assert.equal(attempts, 3);
    assert.equal(value, 21);
    assert.equal((await kv.get(["n"])).value, 21);
    assert.equal(commitRetryCounts().get("test.increment")?.conflicts, 2);
  }));

Deno.test("commitWithRetry returns `done` without committing", () =>
  withKv(async (kv) => {
    const r = await commitWithRetry("test.noop", () => Promise.resolve({ done: "unchanged" }));
    assert.equal(r, "unchanged");
    assert.equal((await kv.get(["n"])).versionstamp, null);
  }));

Deno.test("commitWithRetry gives up after its attempts with the caller's error", () =>
  withKv(async (kv) => {
    let betweens = 0;
    await assert.rejects(
      commitWithRetry("test.hopeless", async () => {
        const cur = await kv.get(["k"]);
        await kv.set(["k"], Math.random());
        return { op: kv.atomic().check(cur).set(["k"], 1), value: null };
      }, {
        attempts: 4,
        between: () => {
          betweens++;
          return Promise.resolve();
        },
        exhausted: () => new RangeError("gave up"),
      }),
      RangeError,
    );
    assert.equal(betweens, 3);
    assert.deepEqual(commitRetryCounts().get("test.hopeless"), { conflicts: 4, exhausted: 1 });
  }));

Deno.test("commitWithRetry hands a landed attempt its versionstamp, or answers `otherwise`", () =>
  withKv(async (kv) => {
    const stamp = await commitWithRetry(
      "test.stamp",
      () => Promise.resolve({ op: kv.atomic().set(["s"], 1), landed: (v: string) => v }),
    );
    assert.equal(stamp, (await kv.get(["s"])).versionstamp);
    const answer = await commitWithRetry("test.otherwise", async () => {
      const cur = await kv.get(["s"]);
      await kv.set(["s"], 2);
      return { op: kv.atomic().check(cur).set(["s"], 3), value: "set" };
    }, { attempts: 2, between: () => Promise.resolve(), otherwise: () => "lost" });
    assert.equal(answer, "lost");
    assert.equal((await kv.get(["s"])).value, 2);
  }));
