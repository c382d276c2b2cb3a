// Issue 25: once a client GETs a layer of a manifest fetched from the upstream, the manifest's
// other small blobs (≤ prefetch_max_bytes) are filled at once, ahead of the client's GETs; big
// ones wait for the client, and reading only the manifest and its config fetches no layer. Proven against a
// fake upstream that counts what it is asked and can be made to fail everything afterwards.
import assert from "node:assert/strict";
import { FakeRegistry, randomBytes } from "../helpers/fake_registry.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { bytesOf, req, serverTestOpts } from "../helpers/api.ts";
import { MAX_PER_MANIFEST } from "../../lib/pull_through/prefetch.ts";
import {
  imageManifest,
  jsonBytes,
  OCI_CONFIG,
  OCI_LAYER,
  OCI_MANIFEST,
} from "../helpers/oci_content.ts";

const MANIFEST = OCI_MANIFEST;

function image(up: FakeRegistry, name: string, sizes: number[]) {
  const cfg = jsonBytes({ os: "linux", n: crypto.randomUUID() });
  const config = up.addBlob(name, cfg);
  const layers = sizes.map((n) => {
    const bytes = randomBytes(n);
    return { digest: up.addBlob(name, bytes), bytes, size: n };
  });
  const manifest = up.addManifest(
    name,
    imageManifest(
      { mediaType: OCI_CONFIG, digest: config, size: cfg.length },
      layers.map((l) => ({ mediaType: OCI_LAYER, digest: l.digest, size: l.size })),
    ),
    { tags: ["v1"] },
  );
  return { config, cfg, layers, manifest };
}

const config = (upUrl: string, extra = "") =>
  `[repository."hub"]\n${extra}[[repository."hub".upstream]]\nurl = "${upUrl}"\n`;

async function until(what: string, ok: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function getManifest(s: TestServer, name: string, method = "GET"): Promise<void> {
  const m = await req(s, `/v2/hub/${name}/manifests/v1`, { method, headers: { accept: MANIFEST } });
  assert.equal(m.status, 200);
  await m.body?.cancel();
}

Deno.test(
  "prefetch: the first layer GET caches the manifest's other small blobs, not its big ones; an inspection fetches no layer",
  serverTestOpts,
  async () => {
    const up = await FakeRegistry.start();
    try {
      const img = image(up, "library/app", [10_000, 20_000, 30_000, 200_000]);
      await withServer({ config: config(up.url, "prefetch_max_bytes = 65536\n") }, async (s) => {
        await getManifest(s, "library/app");
        // `skopeo inspect`: the manifest and the config, no layer
        const c0 = await req(s, `/v2/hub/library/app/blobs/${img.config}`);
        assert.deepEqual(await bytesOf(c0), img.cfg);
        await sleep(500);
        assert.equal(up.count("GET", /\/blobs\//), 1, "only the config was fetched");
        const first = await req(s, `/v2/hub/library/app/blobs/${img.layers[0].digest}`);
        assert.deepEqual(await bytesOf(first), img.layers[0].bytes);
        const small = img.layers.slice(0, 3).map((l) => l.digest);
        const big = img.layers[3].digest;
        await until(
          "the small layers fetched upstream",
          () => small.every((d) => up.count("GET", `/blobs/${d}`) === 1),
        );
        await sleep(300); // settled and linked
        assert.equal(
          up.count("GET", `/blobs/${big}`),
          0,
          "a blob over prefetch_max_bytes waits for its GET",
        );
        // Served with the upstream failing everything from now on: they are in the cache.
        up.fault({ path: /./ }, { status: 503 });
        for (const [i, l] of img.layers.slice(0, 3).entries()) {
          const r = await req(s, `/v2/hub/library/app/blobs/${l.digest}`);
          assert.equal(r.status, 200, `layer ${i}`);
          assert.deepEqual(await bytesOf(r), l.bytes);
        }
        const b = await req(s, `/v2/hub/library/app/blobs/${big}`);
        assert.equal(b.status, 503, "the big layer was never cached");
        await b.body?.cancel();
        for (const d of [img.config, ...small]) {
          assert.equal(up.count("GET", `/blobs/${d}`), 1);
        }
        const metrics = await (await req(s, "/metrics")).text();
        // layers 1 and 2 (the config was already linked, layer 0 was the GET itself)
        assert.match(metrics, /wharf_pull_through_total\{kind="blob",result="prefetch"\} 2\b/);
      });
    } finally {
      await up.close();
    }
  },
);

Deno.test(
  "prefetch: a client GET during a prefetch follows it (one upstream fetch); a manifest fetched by HEAD counts",
  serverTestOpts,
  async () => {
    const up = await FakeRegistry.start();
    try {
      const img = image(up, "library/slow", [1_000, 50_000]);
      const slow = img.layers[1];
      // The second layer trickles in over ~1 s: the client's GET arrives mid-prefetch.
      up.fault({ method: "GET", path: `/blobs/${slow.digest}` }, {
        trickleMs: 20,
        chunkBytes: 1024,
      });
      await withServer({ config: config(up.url) }, async (s) => {
        await getManifest(s, "library/slow", "HEAD");
        const first = await req(s, `/v2/hub/library/slow/blobs/${img.layers[0].digest}`);
        assert.deepEqual(await bytesOf(first), img.layers[0].bytes);
        await until("the prefetch to start", () => up.count("GET", `/blobs/${slow.digest}`) === 1);
        const r = await req(s, `/v2/hub/library/slow/blobs/${slow.digest}`);
        assert.equal(r.status, 200);
        assert.deepEqual(await bytesOf(r), slow.bytes);
        assert.equal(up.count("GET", `/blobs/${slow.digest}`), 1, "the GET followed the prefetch");
      });
    } finally {
      await up.close();
    }
  },
);

Deno.test("prefetch: prefetch_max_bytes = 0 fetches nothing ahead", serverTestOpts, async () => {
  const up = await FakeRegistry.start();
  try {
    const img = image(up, "library/off", [1000, 2000]);
    await withServer({ config: config(up.url, "prefetch_max_bytes = 0\n") }, async (s) => {
      await getManifest(s, "library/off");
      const r = await req(s, `/v2/hub/library/off/blobs/${img.layers[0].digest}`);
      assert.deepEqual(await bytesOf(r), img.layers[0].bytes);
      await sleep(800);
      assert.equal(up.count("GET", /\/blobs\//), 1, "only the layer asked for");
    });
  } finally {
    await up.close();
  }
});

Deno.test(
  "prefetch: a manifest naming thousands of missing layers costs at most MAX_PER_MANIFEST more GETs and breaks nothing",
  serverTestOpts,
  async () => {
    const up = await FakeRegistry.start();
    try {
      const cfg = up.addBlob("library/many", new TextEncoder().encode("{}"));
      const layers = Array.from({ length: 3000 }, (_, i) => ({
        mediaType: OCI_LAYER,
        digest: `sha256:${i.toString(16).padStart(64, "0")}`,
        size: 10,
      }));
      up.addManifest(
        "library/many",
        imageManifest({ mediaType: OCI_CONFIG, digest: cfg, size: 2 }, layers),
        { tags: ["v1"] },
      );
      await withServer({ config: config(up.url) }, async (s) => {
        await getManifest(s, "library/many");
        const first = await req(s, `/v2/hub/library/many/blobs/${layers[0].digest}`);
        assert.equal(first.status, 404);
        await first.body?.cancel();
        await until(
          "the prefetch queue to drain",
          () => up.count("GET", /\/blobs\//) >= MAX_PER_MANIFEST + 1,
        );
        await sleep(500);
        // the layer asked for, then MAX_PER_MANIFEST of the others (the config first)
        assert.equal(up.count("GET", /\/blobs\//), MAX_PER_MANIFEST + 1);
        assert.equal(up.count("GET", `/blobs/${cfg}`), 1);
        const c = await req(s, `/v2/hub/library/many/blobs/${cfg}`);
        assert.equal(c.status, 200);
        await c.body?.cancel();
        assert.equal(up.count("GET", `/blobs/${cfg}`), 1, "served from the cache");
        // a second layer GET of the same manifest queues nothing more
        const again = await req(s, `/v2/hub/library/many/blobs/${layers[1].digest}`);
        await again.body?.cancel();
        await sleep(300);
        assert.equal(up.count("GET", /\/blobs\//), MAX_PER_MANIFEST + 2);
      });
    } finally {
      await up.close();
    }
  },
);
