// OCI content for the API tests: media types, descriptors, manifest and index bodies, and
// manifest pushes. Bodies are built here and hashed by the caller's expectations, so a helper
// change that altered bytes would show up as digest mismatches, not silent passes.
import assert from "node:assert/strict";
import { req } from "./api.ts";
import { sha256 } from "./bytes.ts";
import type { TestServer } from "./server.ts";

export const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
export const OCI_INDEX = "application/vnd.oci.image.index.v1+json";
export const OCI_CONFIG = "application/vnd.oci.image.config.v1+json";
export const OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip";
export const OCI_EMPTY = "application/vnd.oci.empty.v1+json";
export const DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json";

const enc = new TextEncoder();

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  artifactType?: string;
  annotations?: Record<string, string>;
  [k: string]: unknown;
}

export function jsonBytes(v: unknown): Uint8Array {
  return enc.encode(JSON.stringify(v));
}

/** Unique bytes per call, so digests never collide across cases. */
export function unique(label: string): Uint8Array {
  return enc.encode(`${label} ${crypto.randomUUID()}`);
}

export async function descOf(mediaType: string, data: Uint8Array): Promise<Descriptor> {
  return { mediaType, digest: await sha256(data), size: data.length };
}

export function imageManifest(config: Descriptor, layers: Descriptor[], extra = {}): Uint8Array {
  return jsonBytes({ schemaVersion: 2, mediaType: OCI_MANIFEST, config, layers, ...extra });
}

export function imageIndex(manifests: Descriptor[], extra = {}): Uint8Array {
  return jsonBytes({ schemaVersion: 2, mediaType: OCI_INDEX, manifests, ...extra });
}

/** A distinct manifest body (blobs left missing, which the default config allows). */
export async function distinctManifest(
  label: string,
): Promise<{ body: Uint8Array; digest: string }> {
  const cfg = jsonBytes({ label, nonce: crypto.randomUUID() });
  const body = imageManifest(await descOf(OCI_CONFIG, cfg), []);
  return { body, digest: await sha256(body) };
}

export function putManifest(
  s: TestServer,
  ns: string,
  ref: string,
  body: Uint8Array,
  contentType = OCI_MANIFEST,
  query = "",
  headers: Record<string, string> = {},
): Promise<Response> {
  return req(s, `/v2/${ns}/manifests/${ref}${query}`, {
    method: "PUT",
    body: body as BodyInit,
    headers: { "content-type": contentType, ...headers },
  });
}

/** A manifest push that must answer 201; the body is consumed, the headers stay readable. */
export async function putManifestOk(
  s: TestServer,
  ns: string,
  ref: string,
  body: Uint8Array,
  contentType = OCI_MANIFEST,
): Promise<Response> {
  const r = await putManifest(s, ns, ref, body, contentType);
  const text = await r.text();
  assert.equal(r.status, 201, `PUT ${ns}:${ref}: ${r.status} ${text}`);
  return r;
}
