// Property and mutation fuzzing of manifest and index validation: every push goes through it.
import assert from "node:assert/strict";
import { parseManifest } from "./manifest.ts";
import { RegistryError } from "./errors.ts";
import {
  expectOnly,
  FAST_MS,
  fc,
  fuzzParams,
  mutated,
  withinSync,
} from "../../tests/helpers/fuzz.ts";

const enc = new TextEncoder();
const hex = fc.stringMatching(/^[a-f0-9]{64}$/);
const digest = hex.map((h) => `sha256:${h}`);
const mediaType = fc.constantFrom(
  "application/vnd.oci.image.layer.v1.tar+gzip",
  "application/vnd.oci.image.config.v1+json",
  "application/vnd.example+json",
);
const descriptor = fc.record({
  mediaType,
  digest,
  size: fc.nat(),
  annotations: fc.option(
    fc.dictionary(fc.string({ maxLength: 10 }), fc.string({ maxLength: 10 })),
    {
      nil: undefined,
    },
  ),
}, { requiredKeys: ["mediaType", "digest", "size"] });

const IMAGE = "application/vnd.oci.image.manifest.v1+json";
const INDEX = "application/vnd.oci.image.index.v1+json";

function check(body: Uint8Array, ct: string | null): void {
  try {
    const m = withinSync(FAST_MS, "parseManifest", () => parseManifest(body, ct));
    assert.ok(m.blobs.length + m.children.length <= body.length / 70 + 1);
    for (const d of [...m.blobs, ...m.children.map((c) => c.digest)]) {
      assert.match(d, /^sha(256:[a-f0-9]{64}|512:[a-f0-9]{128})$/);
    }
  } catch (e) {
    expectOnly(e, RegistryError);
    assert.equal((e as RegistryError).code, "MANIFEST_INVALID");
  }
}

Deno.test("fuzz manifest: valid images and indexes round-trip their references", () => {
  fc.assert(
    fc.property(
      descriptor,
      fc.array(descriptor, { maxLength: 5 }),
      fc.option(descriptor, { nil: undefined }),
      (config, layers, subject) => {
        const body = enc.encode(JSON.stringify({
          schemaVersion: 2,
          mediaType: IMAGE,
          config,
          layers,
          subject,
        }));
        const m = parseManifest(body, IMAGE);
        assert.deepEqual(m.blobs, [...new Set([config.digest, ...layers.map((l) => l.digest)])]);
        assert.deepEqual(m.layers.map((l) => l.digest), layers.map((l) => l.digest));
        assert.equal(m.subject, subject?.digest);
        const index = enc.encode(JSON.stringify({
          schemaVersion: 2,
          mediaType: INDEX,
          manifests: layers,
        }));
        assert.deepEqual(
          parseManifest(index, null).children.map((c) => c.digest),
          layers.map((
            l,
          ) => l.digest),
        );
      },
    ),
    fuzzParams(),
  );
});

Deno.test("fuzz manifest: mutations are accepted or MANIFEST_INVALID, never another error", () => {
  const sample = enc.encode(JSON.stringify({
    schemaVersion: 2,
    mediaType: IMAGE,
    config: {
      mediaType: "application/vnd.oci.image.config.v1+json",
      digest: `sha256:${"a".repeat(64)}`,
      size: 2,
    },
    layers: [{
      mediaType: "application/vnd.oci.image.layer.v1.tar+gzip",
      digest: `sha256:${"b".repeat(64)}`,
      size: 3,
      platform: { os: "linux", architecture: "amd64" },
    }],
    annotations: { a: "b" },
  }));
  fc.assert(
    fc.property(
      mutated(sample, 8),
      fc.option(fc.oneof(fc.constantFrom(IMAGE, INDEX, `${IMAGE}; charset=utf-8`), fc.string()), {
        nil: null,
      }),
      check,
    ),
    fuzzParams(),
  );
});

Deno.test("fuzz manifest: any JSON shape is accepted or MANIFEST_INVALID", () => {
  const shape = fc.record({
    schemaVersion: fc.oneof(fc.constant(2), fc.jsonValue({ maxDepth: 1 })),
    mediaType: fc.oneof(fc.constantFrom(IMAGE, INDEX), fc.jsonValue({ maxDepth: 1 })),
    config: fc.oneof(descriptor, fc.jsonValue({ maxDepth: 3 })),
    layers: fc.oneof(fc.array(descriptor, { maxLength: 3 }), fc.jsonValue({ maxDepth: 3 })),
    manifests: fc.oneof(fc.array(descriptor, { maxLength: 3 }), fc.jsonValue({ maxDepth: 3 })),
    subject: fc.jsonValue({ maxDepth: 3 }),
    annotations: fc.jsonValue({ maxDepth: 2 }),
    artifactType: fc.jsonValue({ maxDepth: 1 }),
  }, { requiredKeys: [] });
  fc.assert(
    fc.property(
      fc.oneof(shape, fc.jsonValue({ maxDepth: 4 })),
      fc.option(fc.constantFrom(IMAGE, INDEX), { nil: null }),
      (v, ct) => {
        check(enc.encode(JSON.stringify(v) ?? ""), ct);
      },
    ),
    fuzzParams(),
  );
});

Deno.test("fuzz manifest: deep nesting in 4 MiB is MANIFEST_INVALID, not a stack overflow", () => {
  const deep = "[".repeat(2_000_000) + "]".repeat(2_000_000);
  check(enc.encode(`{"schemaVersion":2,"mediaType":"${IMAGE}","config":${deep}}`), null);
  check(enc.encode(`{"schemaVersion":2,"annotations":{"a":${deep}}}`), IMAGE);
});
