// Issue 26 part 2: "an image being served or filled is never evicted", across processes. Two
// Wharf processes serve one capped pull-through repository from one KV file and blob dir; what
// one of them serves, fills or has just been asked for, the other never evicts: a pull stamp
// is a lease for the hold (shortened here), renewed while a blob streams. Once the stream is
// over and the hold has passed, the image is an ordinary candidate again.
import assert from "node:assert/strict";
import { FakeRegistry, generatedBlob } from "../helpers/fake_registry.ts";
import { req, serverTestOpts } from "../helpers/api.ts";
import { descOf, imageManifest, jsonBytes, OCI_CONFIG, OCI_LAYER } from "../helpers/oci_content.ts";
import { startServer, type TestServer } from "../helpers/server.ts";
import {
  addImage,
  cacheConfig,
  cachedTags,
  type Image,
  pull,
  pullBlob,
  pullManifest,
  roomForOne,
  settled,
  sleep,
  status,
} from "./_cache_images.ts";

// The hold, shortened for the servers this file starts (commands/test_env.ts): renewals every
// HOLD_MS / 3.
const HOLD_MS = 1500;
const env = { WHARF_TEST_CACHE_HOLD_MS: String(HOLD_MS) };

const EVICTED = /evicted cached images to stay under max_cache_bytes/;

/** Two servers on one KV file and blob dir, stopped and cleaned up after `fn`. */
async function withTwo(
  config: string,
  fn: (a: TestServer, b: TestServer) => Promise<void>,
): Promise<void> {
  const a = await startServer({ config, env });
  let b: TestServer | undefined;
  try {
    b = await startServer({ config, env, dataDir: a.dataDir });
    await fn(a, b);
  } finally {
    await b?.stop();
    await a.stop();
    await Deno.remove(a.dataDir, { recursive: true }).catch(() => {});
  }
}

Deno.test(
  "cache cap: an image another process is filling and streaming is not evicted; after the hold it is",
  serverTestOpts,
  async () => {
    const up = await FakeRegistry.start();
    try {
      const x = await addImage(up, "library/x");
      const y = await addImage(up, "library/y");
      const z = await addImage(up, "library/z");
      const cap = roomForOne(x, y, z);
      // x's layer comes from the upstream slowly: A's fill, and its client, last ~5 holds.
      const layer = x.blobs[1];
      const chunkBytes = 256;
      const trickleMs = Math.ceil(5 * HOLD_MS / Math.ceil(layer.bytes.length / chunkBytes));
      up.fault({ method: "GET", path: `/v2/library/x/blobs/${layer.digest}` }, {
        trickleMs,
        chunkBytes,
      });
      await withTwo(cacheConfig(up, cap), async (a, b) => {
        await pullManifest(a, x);
        await pullBlob(a, x, 0);
        const started = Date.now();
        const streaming = pullBlob(a, x, 1).then(() => null, (e) => e);
        // Past x's manifest pull's own hold: only A's renewals keep x in use now.
        await sleep(2 * HOLD_MS);
        // y needs room beside x; x is the only other image and it is in use: the fill goes over
        // the cap, as it does whenever nothing is evictable.
        await pull(b, y);
        assert.ok(Date.now() - started < 5 * HOLD_MS, "x still streaming while y was filled");
        assert.deepEqual(await cachedTags(b, x), ["latest"], "x, streaming in A, kept");
        assert.deepEqual(await cachedTags(a, x), ["latest"]);
        assert.equal(await streaming, null, "x's layer streamed whole to A's client");
        await settled(b, x.size + y.size);
        assert.ok((await status(b)).used_bytes as number > cap, "over the cap, nothing evicted");
        assert.doesNotMatch(b.output(), EVICTED);

        // The stream is over; once the hold has passed x is a candidate like any other.
        await sleep(HOLD_MS + 300);
        await pull(b, z);
        await settled(b, z.size);
        assert.deepEqual(await cachedTags(b, x), [], "x evicted once out of use");
        assert.deepEqual(await cachedTags(b, y), [], "y evicted");
        assert.deepEqual(await cachedTags(b, z), ["latest"]);
        assert.match(b.output(), EVICTED);
      });
    } finally {
      await up.close();
    }
  },
);

Deno.test(
  "cache cap: an image another process served a moment ago is not evicted; after the hold it is",
  serverTestOpts,
  async () => {
    const up = await FakeRegistry.start();
    try {
      const x = await addImage(up, "library/x");
      const y = await addImage(up, "library/y");
      const z = await addImage(up, "library/z");
      const cap = roomForOne(x, y, z);
      await withTwo(cacheConfig(up, cap), async (a, b) => {
        await pull(b, x);
        await settled(b, x.size);
        await sleep(HOLD_MS + 300);
        // x, out of its hold, is pulled again through A (from the cache: the tag is revalidated
        // with a HEAD, nothing is fetched).
        const gets = () => up.requests.filter((r) => r.method === "GET").length;
        const fetched = gets();
        await pullManifest(a, x);
        assert.equal(gets(), fetched, "served from the cache");
        await sleep(100); // the stamp is written beside the answer, not before it
        await pull(b, y);
        await settled(b, x.size + y.size);
        assert.deepEqual(await cachedTags(b, x), ["latest"], "x, just pulled through A, kept");
        assert.doesNotMatch(b.output(), EVICTED);

        await sleep(HOLD_MS + 300);
        await pull(b, z);
        await settled(b, z.size);
        assert.deepEqual(await cachedTags(b, x), [], "x evicted once out of use");
        assert.match(b.output(), EVICTED);
      });
    } finally {
      await up.close();
    }
  },
);

/** An image whose layer is `size` generated bytes (`blobs[1].bytes` stays empty: too large). */
async function addLargeImage(up: FakeRegistry, name: string, size: number): Promise<Image> {
  const cfg = jsonBytes({ architecture: "amd64", os: "linux", nonce: crypto.randomUUID() });
  const layer = generatedBlob(size);
  up.addBlob(name, cfg);
  up.addBlob(name, layer.source, layer.digest);
  const layerDesc = { mediaType: OCI_LAYER, digest: layer.digest, size };
  const manifest = imageManifest(await descOf(OCI_CONFIG, cfg), [layerDesc]);
  const digest = up.addManifest(name, manifest, { tags: ["latest"] });
  const blobs = [
    { digest: (await descOf(OCI_CONFIG, cfg)).digest, bytes: cfg },
    { digest: layer.digest, bytes: new Uint8Array() },
  ];
  return { name, manifest, digest, blobs, size: manifest.length + cfg.length + size };
}

Deno.test(
  "cache cap: a cached image another process streams to a slow client is not evicted; after the hold it is",
  serverTestOpts,
  async () => {
    const up = await FakeRegistry.start();
    try {
      // Far more than the socket buffers hold: the server's stream stays open while the client
      // does not read.
      const LAYER = 32 << 20;
      const x = await addLargeImage(up, "library/x", LAYER);
      const y = await addImage(up, "library/y");
      const z = await addImage(up, "library/z");
      // x alone fits; x and anything else does not; y and z together do.
      const cap = x.size + 100;
      await withTwo(cacheConfig(up, cap), async (a, b) => {
        await pullManifest(b, x);
        await pullBlob(b, x, 0);
        const fill = await req(b, `/v2/hub/${x.name}/blobs/${x.blobs[1].digest}`);
        assert.equal((await fill.arrayBuffer()).byteLength, LAYER);
        await settled(b, x.size);
        await sleep(HOLD_MS + 300);

        // A serves x's cached layer to a client that reads one piece, then pauses.
        const r = await req(a, `/v2/hub/${x.name}/blobs/${x.blobs[1].digest}`);
        assert.equal(r.status, 200);
        const reader = r.body!.getReader();
        let got = (await reader.read()).value?.byteLength ?? 0;
        // Past every stamp's own hold: only A's renewals keep x in use now.
        await sleep(2 * HOLD_MS);
        await pull(b, y);
        assert.deepEqual(await cachedTags(b, x), ["latest"], "x, streaming from A, kept");
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          got += value.byteLength;
        }
        assert.equal(got, LAYER, "x's layer streamed whole");
        await settled(b, x.size + y.size);
        assert.doesNotMatch(b.output(), EVICTED);

        await sleep(HOLD_MS + 300);
        // y and z fit together: whether y goes too depends on which of y's pull and x's last
        // renewal came first.
        await pull(b, z);
        const end = Date.now() + 20_000;
        while (![z.size, y.size + z.size].includes((await status(b)).used_bytes as number)) {
          assert.ok(Date.now() < end, `usage never settled: ${JSON.stringify(await status(b))}`);
          await sleep(50);
        }
        assert.deepEqual(await cachedTags(b, x), [], "x evicted once out of use");
        assert.deepEqual(await cachedTags(b, z), ["latest"]);
        assert.match(b.output(), EVICTED);
      });
    } finally {
      await up.close();
    }
  },
);
