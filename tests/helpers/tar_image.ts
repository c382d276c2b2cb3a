// An image of gzipped tar layers pushed over HTTP (config, layers, then the manifest under a
// tag), and an index of one such image, for the tests and benches of the layer index, image
// reports, diff and file search.
import assert from "node:assert/strict";
import { gzipSync } from "node:zlib";
import { pushBlob } from "./server.ts";
import { jsonBytes, OCI_CONFIG, OCI_INDEX, OCI_MANIFEST } from "./oci_content.ts";

export async function pushTarImage(
  url: string,
  ns: string,
  tag: string,
  tars: Uint8Array[],
  config: Record<string, unknown> = {},
): Promise<{ digest: string; size: number; layers: string[] }> {
  const cfg = jsonBytes({ architecture: "amd64", os: "linux", ...config });
  const configDigest = await pushBlob(url, ns, cfg);
  const layers = [];
  for (const t of tars) {
    const b = new Uint8Array(gzipSync(t));
    layers.push({
      mediaType: "application/vnd.oci.image.layer.v1.tar+gzip",
      digest: await pushBlob(url, ns, b),
      size: b.length,
    });
  }
  const manifest = jsonBytes({
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    config: { mediaType: OCI_CONFIG, digest: configDigest, size: cfg.length },
    layers,
  });
  const r = await fetch(`${url}/v2/${ns}/manifests/${tag}`, {
    method: "PUT",
    headers: { "content-type": OCI_MANIFEST },
    body: manifest as BodyInit,
  });
  if (r.status !== 201) throw new Error(`push ${ns}:${tag}: ${r.status} ${await r.text()}`);
  await r.body?.cancel();
  return {
    digest: r.headers.get("docker-content-digest")!,
    size: manifest.length,
    layers: layers.map((l) => l.digest),
  };
}

/** An index under `tag` naming one image (as pushTarImage returns it) as linux/amd64; its digest. */
export async function pushTarIndex(
  url: string,
  ns: string,
  tag: string,
  image: { digest: string; size: number },
): Promise<string> {
  const r = await fetch(`${url}/v2/${ns}/manifests/${tag}`, {
    method: "PUT",
    headers: { "content-type": OCI_INDEX },
    body: jsonBytes({
      schemaVersion: 2,
      mediaType: OCI_INDEX,
      manifests: [{
        mediaType: OCI_MANIFEST,
        digest: image.digest,
        size: image.size,
        platform: { os: "linux", architecture: "amd64" },
      }],
    }) as BodyInit,
  });
  assert.equal(r.status, 201, await r.text());
  return r.headers.get("docker-content-digest")!;
}
