import assert from "node:assert/strict";
import { parseManifest } from "./manifest.ts";
import { RegistryError } from "./errors.ts";

const enc = (v: unknown) => new TextEncoder().encode(JSON.stringify(v));
const d = (c: string) => `sha256:${c.repeat(64)}`;
const image = {
  schemaVersion: 2,
  mediaType: "application/vnd.oci.image.manifest.v1+json",
  config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: d("a"), size: 2 },
  layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", digest: d("b"), size: 3 }],
};

function invalid(fn: () => unknown, re?: RegExp) {
  assert.throws(
    fn,
    (e) =>
      e instanceof RegistryError && e.code === "MANIFEST_INVALID" && (!re || re.test(e.detail)),
  );
}

Deno.test("image manifest: blobs, artifactType from config, subject", () => {
  const p = parseManifest(
    enc({ ...image, subject: { mediaType: image.mediaType, digest: d("c"), size: 9 } }),
    null,
  );
  assert.deepEqual(p.blobs, [d("a"), d("b")]);
  assert.equal(p.subject, d("c"));
  assert.equal(p.artifactType, "application/vnd.oci.image.config.v1+json");
});

Deno.test("index: children with platforms", () => {
  const p = parseManifest(
    enc({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.index.v1+json",
      manifests: [{
        mediaType: image.mediaType,
        digest: d("c"),
        size: 5,
        platform: { os: "linux", architecture: "arm64", variant: "v8" },
      }],
    }),
    "application/vnd.oci.image.index.v1+json",
  );
  assert.deepEqual(p.children, [{
    digest: d("c"),
    platform: { os: "linux", architecture: "arm64", variant: "v8" },
  }]);
});

Deno.test("Content-Type must agree with mediaType; parameters ignored", () => {
  assert.equal(
    parseManifest(enc(image), "application/vnd.oci.image.manifest.v1+json; charset=utf-8")
      .mediaType,
    image.mediaType,
  );
  invalid(() => parseManifest(enc(image), "application/vnd.oci.image.index.v1+json"), /disagrees/);
  const { mediaType: _, ...noType } = image;
  assert.equal(
    parseManifest(enc(noType), "application/vnd.docker.distribution.manifest.v2+json").mediaType,
    "application/vnd.docker.distribution.manifest.v2+json",
  );
  invalid(() => parseManifest(enc(noType), null), /no media type/);
});

Deno.test("malformed manifests are MANIFEST_INVALID", () => {
  invalid(() => parseManifest(new TextEncoder().encode("{"), null));
  invalid(() => parseManifest(enc([1]), null));
  invalid(() => parseManifest(enc({ ...image, schemaVersion: 1 }), null));
  invalid(
    () =>
      parseManifest(enc({ ...image, layers: [{ ...image.layers[0], digest: "sha256:zz" }] }), null),
    /digest/,
  );
  invalid(
    () => parseManifest(enc({ ...image, layers: [{ ...image.layers[0], size: -1 }] }), null),
    /size/,
  );
  invalid(() => parseManifest(enc({ ...image, config: undefined }), null), /config/);
  invalid(() => parseManifest(enc({ ...image, annotations: { a: 1 } }), null), /annotation/);
  invalid(() => parseManifest(new Uint8Array([0xff, 0xfe]), null));
});
