import assert from "node:assert/strict";
import { RegistryError } from "../oci/mod.ts";
import {
  COMMIT_RETRY_MS,
  CommitExhausted,
  commitRetryCounts,
  commitWithRetry,
} from "./commit_retry.ts";

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

Deno.test("commitWithRetry retries a lasting conflict for its time, then answers 503: the KV is overloaded", () =>
  withKv(async (kv) => {
    let attempts = 0;
    const t0 = performance.now();
    const err = await commitWithRetry("test.overloaded", async () => {
      attempts++;
      const cur = await kv.get(["k"]);
      await kv.set(["k"], attempts); // another writer overtakes every attempt
      return { op: kv.atomic().check(cur).set(["k"], 0), value: null };
    }, { withinMs: 200 }).then(() => null, (e: unknown) => e);
    const took = performance.now() - t0;
    assert.ok(err instanceof CommitExhausted, String(err));
    assert.ok(err instanceof RegistryError);
    assert.equal(err.status, 503);
    assert.equal(err.code, "PROVIDER_UNAVAILABLE");
    assert.equal(err.headers["Retry-After"], "1");
    assert.match(
      err.detail,
      /^the metadata store is overloaded: test\.overloaded did not commit in 0\.\d s \(\d+ attempts, each overtaken by another write\): retry later$/,
    );
    assert.doesNotMatch(err.detail, /conflicting/);
    assert.ok(took >= 200 && took < 2_000, `gave up after ${took} ms`);
    // Not a count: as many attempts as the time held, each after a jittered pause.
    assert.ok(attempts > 5, `${attempts} attempts`);
    assert.equal(commitRetryCounts().get("test.overloaded")?.exhausted, 1);
  }));

Deno.test("commitWithRetry's default bound is time, not attempts: a conflict past 20 attempts still wins", () =>
  withKv(async (kv) => {
    let attempts = 0;
    const value = await commitWithRetry("test.patient", async () => {
      attempts++;
      const cur = await kv.get(["p"]);
      if (attempts <= 40) await kv.set(["p"], attempts);
      return { op: kv.atomic().check(cur).set(["p"], "won"), value: "won" };
    }, { between: () => Promise.resolve() });
    assert.equal(value, "won");
    assert.equal(attempts, 41);
    assert.ok(COMMIT_RETRY_MS >= 5_000);
  }));
