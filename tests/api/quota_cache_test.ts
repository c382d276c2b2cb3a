// Issue 26 part 2: `max_cache_bytes` on a pull-through repository. A fill that would pass the
// cap evicts the least recently pulled image (its tag and manifest go, its blobs are unlinked
// for scrub); the image being filled is kept; an evicted image is fetched again on its next pull.
import assert from "node:assert/strict";
import { FakeRegistry } from "../helpers/fake_registry.ts";
import { bytesOf, req, serverTestOpts } from "../helpers/api.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import {
  descOf,
  imageManifest,
  jsonBytes,
  OCI_CONFIG,
  OCI_LAYER,
  OCI_MANIFEST,
  unique,
} from "../helpers/oci_content.ts";

interface Image {
  name: string;
  manifest: Uint8Array;
  digest: string;
  blobs: { digest: string; bytes: Uint8Array }[];
  size: number;
}

async function addImage(up: FakeRegistry, name: string): Promise<Image> {
  const cfg = jsonBytes({ architecture: "amd64", os: "linux", nonce: crypto.randomUUID() });
  const layer = unique(`layer of ${name} `.repeat(400));
  up.addBlob(name, cfg);
  up.addBlob(name, layer);
  const manifest = imageManifest(await descOf(OCI_CONFIG, cfg), [await descOf(OCI_LAYER, layer)]);
  const digest = up.addManifest(name, manifest, { tags: ["latest"] });
  const blobs = [
    { digest: (await descOf(OCI_CONFIG, cfg)).digest, bytes: cfg },
    { digest: (await descOf(OCI_LAYER, layer)).digest, bytes: layer },
  ];
  return { name, manifest, digest, blobs, size: manifest.length + cfg.length + layer.length };
}

async function pull(s: TestServer, img: Image): Promise<void> {
  const m = await req(s, `/v2/hub/${img.name}/manifests/latest`, {
    headers: { Accept: OCI_MANIFEST },
  });
  assert.equal(m.status, 200);
  assert.deepEqual(await bytesOf(m), img.manifest);
  for (const b of img.blobs) {
    const r = await req(s, `/v2/hub/${img.name}/blobs/${b.digest}`);
    assert.equal(r.status, 200);
    assert.deepEqual(await bytesOf(r), b.bytes);
  }
}

/** Waits until the fills of what was pulled are linked (they settle just after the stream). */
async function settled(s: TestServer, want: number): Promise<void> {
  const end = Date.now() + 20_000;
  while ((await status(s)).used_bytes !== want) {
    if (Date.now() > end) {
      throw new Error(`usage never reached ${want}: ${JSON.stringify(await status(s))}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function status(s: TestServer): Promise<Record<string, unknown>> {
  const r = await req(s, "/v2/_svc/repositories/list");
  const body = await r.json() as { repositories: Record<string, unknown>[] };
  return body.repositories.find((x) => x.name === "hub")!;
}

const manifestFetches = (up: FakeRegistry, img: Image) =>
  up.requests.filter((r) => r.method === "GET" && r.path.startsWith(`/v2/${img.name}/manifests/`))
    .length;

async function cachedTags(s: TestServer, img: Image): Promise<string[]> {
  const r = await req(s, `/v2/hub/${img.name}/tags/list`);
  if (r.status === 404) {
    await r.body?.cancel();
    return [];
  }
  return (await r.json()).tags ?? [];
}

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
      const config = `
[repository."hub"]
max_cache_bytes = ${cap}

[[repository."hub".upstream]]
url = "${up.url}"
`;
      await withServer({ config }, async (s) => {
        await pull(s, a);
        await settled(s, a.size);
        await pull(s, b);
        await settled(s, a.size + b.size);
        assert.equal((await status(s)).max_cache_bytes, cap);
        assert.equal((await status(s)).quota_bytes, null);
        // a is pulled again: b is now the least recently pulled.
        await pull(s, a);
        await pull(s, c);
        await settled(s, a.size + c.size);
        assert.deepEqual(await cachedTags(s, b), [], "b evicted");
        assert.deepEqual(await cachedTags(s, a), ["latest"], "a kept");
        assert.deepEqual(await cachedTags(s, c), ["latest"], "c, being filled, kept");

        // b is fetched again on its next pull (and a, now the least recent, makes room).
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
