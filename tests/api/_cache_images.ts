// Images of a fake upstream pulled through a capped `hub` repository (issue 26 part 2), for
// tests/api/quota_cache*_test.ts: each image is a manifest, a config and one layer.
import assert from "node:assert/strict";
import type { FakeRegistry } from "../helpers/fake_registry.ts";
import { bytesOf, req } from "../helpers/api.ts";
import type { TestServer } from "../helpers/server.ts";
import {
  descOf,
  imageManifest,
  jsonBytes,
  OCI_CONFIG,
  OCI_LAYER,
  OCI_MANIFEST,
  unique,
} from "../helpers/oci_content.ts";

export interface Image {
  name: string;
  manifest: Uint8Array;
  digest: string;
  blobs: { digest: string; bytes: Uint8Array }[];
  size: number;
}

export async function addImage(up: FakeRegistry, name: string): Promise<Image> {
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

export async function pullManifest(s: TestServer, img: Image): Promise<void> {
  const m = await req(s, `/v2/hub/${img.name}/manifests/latest`, {
    headers: { Accept: OCI_MANIFEST },
  });
  assert.equal(m.status, 200);
  assert.deepEqual(await bytesOf(m), img.manifest);
}

export async function pullBlob(s: TestServer, img: Image, i: number): Promise<void> {
  const b = img.blobs[i];
  const r = await req(s, `/v2/hub/${img.name}/blobs/${b.digest}`);
  assert.equal(r.status, 200);
  assert.deepEqual(await bytesOf(r), b.bytes);
}

/** The whole image, as a client pulls it: its manifest, then each blob. */
export async function pull(s: TestServer, img: Image): Promise<void> {
  await pullManifest(s, img);
  for (let i = 0; i < img.blobs.length; i++) await pullBlob(s, img, i);
}

/** Waits until the fills of what was pulled are linked (they settle just after the stream). */
export async function settled(s: TestServer, want: number): Promise<void> {
  const end = Date.now() + 20_000;
  while ((await status(s)).used_bytes !== want) {
    if (Date.now() > end) {
      throw new Error(`usage never reached ${want}: ${JSON.stringify(await status(s))}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function status(s: TestServer): Promise<Record<string, unknown>> {
  const r = await req(s, "/v2/_svc/repositories/list");
  const body = await r.json() as { repositories: Record<string, unknown>[] };
  return body.repositories.find((x) => x.name === "hub")!;
}

export async function cachedTags(s: TestServer, img: Image): Promise<string[]> {
  const r = await req(s, `/v2/hub/${img.name}/tags/list`);
  if (r.status === 404) {
    await r.body?.cancel();
    return [];
  }
  return (await r.json()).tags ?? [];
}

/** A cap with room for any one of `images`, never for two. */
export function roomForOne(...images: Image[]): number {
  const sizes = images.map((i) => i.size).sort((a, b) => a - b);
  const cap = sizes[sizes.length - 1] + 100;
  assert.ok(cap < sizes[0] + sizes[1], "images too unequal for a one-image cap");
  return cap;
}

export function cacheConfig(up: FakeRegistry, cap: number): string {
  return `
[repository."hub"]
max_cache_bytes = ${cap}

[[repository."hub".upstream]]
url = "${up.url}"
`;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
