// Issue 26 part 2: `max_cache_bytes` on a pull-through repository. A fill that would pass the
// cap evicts the least recently pulled image (its tag and manifest go, its blobs are unlinked
// for scrub); the image being filled is kept; an evicted image is fetched again on its next pull.
// An image pulled within the hold is in use: the test shortens the hold and waits it out where
// it expects an eviction (tests/api/quota_cache_hold_test.ts tests the hold itself).
import assert from "node:assert/strict";
import { FakeRegistry } from "../helpers/fake_registry.ts";
import { req, serverTestOpts } from "../helpers/api.ts";
import { withServer } from "../helpers/server.ts";
import {
  addImage,
  cacheConfig,
  cachedTags,
  type Image,
  pull,
  settled,
  sleep,
  status,
} from "./_cache_images.ts";

// The hold, shortened for the servers this file starts (commands/test_env.ts).
const HOLD_MS = 1000;
const env = { WHARF_TEST_CACHE_HOLD_MS: String(HOLD_MS) };

const manifestFetches = (up: FakeRegistry, img: Image) =>
  up.requests.filter((r) => r.method === "GET" && r.path.startsWith(`/v2/${img.name}/manifests/`))
    .length;

Deno.test(
  "cache cap: the least recently pulled image is evicted and fetched again on its next pull",
  serverTestOpts,
  async () => {
    const up = await FakeRegistry.start();
    try {
      const a = await addImage(up, "library/a");
      const b = await addImage(up, "library/b");
      const c = await addImage(up, "library/c");
      // Room for two of the three images, not all three.
      const cap = Math.max(a.size + b.size, a.size + c.size, b.size + c.size) + 100;
      assert.ok(cap < a.size + b.size + c.size);
      await withServer({ config: cacheConfig(up, cap), env }, async (s) => {
        await pull(s, a);
        await settled(s, a.size);
        await pull(s, b);
        await settled(s, a.size + b.size);
        assert.equal((await status(s)).max_cache_bytes, cap);
        assert.equal((await status(s)).quota_bytes, null);
        await sleep(HOLD_MS + 200);
        // a is pulled again: b is now the least recently pulled (and out of its hold).
        await pull(s, a);
        await pull(s, c);
        await settled(s, a.size + c.size);
        assert.deepEqual(await cachedTags(s, b), [], "b evicted");
        assert.deepEqual(await cachedTags(s, a), ["latest"], "a kept");
        assert.deepEqual(await cachedTags(s, c), ["latest"], "c, being filled, kept");

        // b is fetched again on its next pull (and a, now the least recent, makes room).
        await sleep(HOLD_MS + 200);
        const before = manifestFetches(up, b);
        await pull(s, b);
        assert.ok(manifestFetches(up, b) > before, "b refetched from the upstream");
        await settled(s, c.size + b.size);
        assert.deepEqual(await cachedTags(s, a), [], "a evicted for b");
        assert.match(s.output(), /evicted cached images to stay under max_cache_bytes/);

        const metrics = await (await req(s, "/metrics")).text();
        assert.match(metrics, /wharf_cache_evictions_total\{repository="hub"\} [1-9]/);
      });
    } finally {
      await up.close();
    }
  },
);
