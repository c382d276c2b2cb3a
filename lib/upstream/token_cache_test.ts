import assert from "node:assert/strict";
import { refreshMarginMs, TokenCache } from "./token_cache.ts";

Deno.test("TokenCache: per (upstream, scope), until shortly before expiry", () => {
  let now = 1_000_000;
  const cache = new TokenCache(() => now);
  cache.set("https://a", "repository:x:pull", { token: "t1", expiresInSecs: 60 });
  assert.equal(cache.get("https://a", "repository:x:pull"), "t1");
  assert.equal(cache.get("https://a", "repository:y:pull"), null, "another scope");
  assert.equal(cache.get("https://b", "repository:x:pull"), null, "another upstream");
  now += 60_000 - refreshMarginMs(60) - 1;
  assert.equal(cache.get("https://a", "repository:x:pull"), "t1");
  now += 1;
  assert.equal(cache.get("https://a", "repository:x:pull"), null, "refreshed before expiry");
  assert.equal(cache.size, 0);
  assert.equal(refreshMarginMs(60), 6_000);
  assert.equal(refreshMarginMs(3600), 30_000);
  cache.set("https://a", "s", { token: "t0", expiresInSecs: 0 });
  assert.equal(cache.get("https://a", "s"), null, "a token already expired is not kept");
});

Deno.test("TokenCache: delete forgets only the refused token", () => {
  const cache = new TokenCache();
  cache.set("u", "s", { token: "new", expiresInSecs: 60 });
  cache.delete("u", "s", "old");
  assert.equal(cache.get("u", "s"), "new", "a token another request refreshed survives");
  cache.delete("u", "s", "new");
  assert.equal(cache.get("u", "s"), null);
});

Deno.test("TokenCache: concurrent misses share one fetch; a failed fetch is not cached", async () => {
  const cache = new TokenCache();
  let fetches = 0;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const fetch = async () => {
    fetches++;
    await gate;
    return { token: `t${fetches}`, expiresInSecs: 60 };
  };
  const all = Promise.all([1, 2, 3].map(() => cache.getOrFetch("u", "s", fetch)));
  release();
  assert.deepEqual(await all, ["t1", "t1", "t1"]);
  assert.equal(fetches, 1);
  assert.equal(await cache.getOrFetch("u", "s", fetch), "t1");
  assert.equal(fetches, 1);

  await assert.rejects(cache.getOrFetch("u", "other", () => Promise.reject(new Error("down"))));
  assert.equal(await cache.getOrFetch("u", "other", fetch), "t2", "the next call fetches again");
});
