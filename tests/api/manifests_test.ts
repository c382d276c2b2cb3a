// SPEC §Manifests rules 2-8: push and pull by tag and digest, media types, size limit, digest
// checks, missing references in both modes, subjects, `tag` parameters, deletes, image indexes.
import assert from "node:assert/strict";
import { assertError, bytesOf, postBlob, req, serverTestOpts } from "../helpers/api.ts";
import { sha256, sha512 } from "../helpers/bytes.ts";
import {
  descOf,
  type Descriptor,
  DOCKER_MANIFEST,
  imageIndex,
  imageManifest,
  OCI_CONFIG,
  OCI_INDEX,
  OCI_LAYER,
  OCI_MANIFEST,
  putManifest,
  putManifestOk,
  unique,
} from "../helpers/oci_content.ts";
import { pushBlob, type TestServer, withServer } from "../helpers/server.ts";

const enc = new TextEncoder();

/** Pushes config + layer blobs into `ns` and returns a manifest body referencing them. */
async function image(s: TestServer, ns: string, label: string, extra = {}) {
  const configBytes = enc.encode(JSON.stringify({ architecture: "amd64", os: "linux", label }));
  const layerBytes = unique(`layer ${label}`);
  const config = await descOf(OCI_CONFIG, configBytes);
  const layer = await descOf(OCI_LAYER, layerBytes);
  await pushBlob(s.url, ns, configBytes);
  await pushBlob(s.url, ns, layerBytes);
  const body = imageManifest(config, [layer], extra);
  return { body, digest: await sha256(body), config, layer };
}

async function assertManifest(
  s: TestServer,
  ns: string,
  ref: string,
  body: Uint8Array,
  mediaType: string,
  digest: string,
): Promise<void> {
  const get = await req(s, `/v2/${ns}/manifests/${ref}`);
  assert.equal(get.status, 200, `GET ${ns}:${ref}`);
  assert.equal(get.headers.get("content-type"), mediaType);
  assert.equal(get.headers.get("docker-content-digest"), digest);
  assert.equal(get.headers.get("content-length"), String(body.length));
  assert.deepEqual(await bytesOf(get), body);

  const head = await req(s, `/v2/${ns}/manifests/${ref}`, { method: "HEAD" });
  assert.equal(head.status, 200, `HEAD ${ns}:${ref}`);
  assert.equal(head.headers.get("content-type"), mediaType);
  assert.equal(head.headers.get("docker-content-digest"), digest);
  assert.equal(head.headers.get("content-length"), String(body.length));
  assert.equal((await head.arrayBuffer()).byteLength, 0);
}

async function assertManifestUnknown(s: TestServer, ns: string, ref: string): Promise<void> {
  await assertError(await req(s, `/v2/${ns}/manifests/${ref}`), 404, "MANIFEST_UNKNOWN");
}

/** Config and layer bytes for `label` (not pushed), their descriptors and the manifest body. */
async function unpushedImage(label: string) {
  const configBytes = enc.encode(JSON.stringify({ os: "linux", label }));
  const layerBytes = unique(`${label} layer`);
  const config = await descOf(OCI_CONFIG, configBytes);
  const layer = await descOf(OCI_LAYER, layerBytes);
  return { configBytes, layerBytes, config, layer, body: imageManifest(config, [layer]) };
}

/** A subject that does not exist is accepted (by digest) and echoed in OCI-Subject. */
async function assertAbsentSubjectAccepted(
  s: TestServer,
  ns: string,
  config: Descriptor,
  layer: Descriptor,
): Promise<void> {
  const subject = await descOf(OCI_MANIFEST, unique("absent subject"));
  const b = imageManifest(config, [layer], {
    artifactType: "application/vnd.example.sig",
    subject,
  });
  const r = await putManifest(s, ns, await sha256(b), b);
  assert.equal(r.status, 201, await r.text());
  assert.equal(r.headers.get("oci-subject"), subject.digest);
}

Deno.test({
  name: "manifest push and pull by tag and by digest",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      const ns = "man/basic";
      const img = await image(s, ns, "basic");

      await t.step("PUT by tag answers 201 with Location and Docker-Content-Digest", async () => {
        const r = await putManifest(s, ns, "v1", img.body);
        assert.equal(r.status, 201, await r.text());
        assert.equal(r.headers.get("docker-content-digest"), img.digest);
        const loc = r.headers.get("location");
        assert.ok(loc, "Location header missing");
        const get = await fetch(new URL(loc, s.url), { signal: AbortSignal.timeout(20_000) });
        assert.equal(get.status, 200, `GET Location ${loc}`);
        assert.equal(get.headers.get("docker-content-digest"), img.digest);
        assert.deepEqual(await bytesOf(get), img.body);
      });

      await t.step("GET and HEAD by tag serve the exact bytes", async () => {
        await assertManifest(s, ns, "v1", img.body, OCI_MANIFEST, img.digest);
      });

      await t.step("GET and HEAD by digest serve the exact bytes", async () => {
        await assertManifest(s, ns, img.digest, img.body, OCI_MANIFEST, img.digest);
      });

      await t.step("an unknown tag or digest is MANIFEST_UNKNOWN", async () => {
        await assertManifestUnknown(s, ns, "nope");
        await assertManifestUnknown(s, ns, await sha256(unique("absent")));
        const head = await req(s, `/v2/${ns}/manifests/nope`, { method: "HEAD" });
        assert.equal(head.status, 404);
        assert.equal((await head.arrayBuffer()).byteLength, 0);
      });

      await t.step("a manifest is readable only in the namespace it was pushed to", async () => {
        await assertManifestUnknown(s, "man/other", img.digest);
      });

      await t.step("re-pushing the same bytes under a second tag keeps one digest", async () => {
        const r = await putManifestOk(s, ns, "v1-again", img.body);
        assert.equal(r.headers.get("docker-content-digest"), img.digest);
        await assertManifest(s, ns, "v1-again", img.body, OCI_MANIFEST, img.digest);
      });

      await t.step("a Docker v2 manifest is served with its own media type", async () => {
        const cfg = enc.encode(JSON.stringify({ os: "linux", docker: true }));
        const lay = unique("docker layer");
        await pushBlob(s.url, ns, cfg);
        await pushBlob(s.url, ns, lay);
        const body = enc.encode(JSON.stringify({
          schemaVersion: 2,
          mediaType: DOCKER_MANIFEST,
          config: await descOf("application/vnd.docker.container.image.v1+json", cfg),
          layers: [await descOf("application/vnd.docker.image.rootfs.diff.tar.gzip", lay)],
        }));
        await putManifestOk(s, ns, "docker", body, DOCKER_MANIFEST);
        await assertManifest(s, ns, "docker", body, DOCKER_MANIFEST, await sha256(body));
      });
    }),
});

Deno.test({
  name: "manifest media type and body validation",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      const ns = "man/valid";

      await t.step(
        "a charset parameter on Content-Type is dropped; pulls serve it bare",
        async () => {
          const img = await image(s, ns, "charset");
          const r = await putManifest(s, ns, "cs", img.body, `${OCI_MANIFEST}; charset=utf-8`);
          assert.equal(r.status, 201, await r.text());
          assert.equal(r.headers.get("docker-content-digest"), img.digest);
          await assertManifest(s, ns, "cs", img.body, OCI_MANIFEST, img.digest);
          await assertManifest(s, ns, img.digest, img.body, OCI_MANIFEST, img.digest);
        },
      );

      await t.step(
        "Content-Type disagreeing with the body's mediaType is MANIFEST_INVALID",
        async () => {
          const img = await image(s, ns, "mismatch");
          await assertError(
            await putManifest(s, ns, "mismatch", img.body, DOCKER_MANIFEST),
            400,
            "MANIFEST_INVALID",
          );
          await assertError(
            await putManifest(s, ns, "mismatch", img.body, OCI_INDEX),
            400,
            "MANIFEST_INVALID",
          );
          await assertManifestUnknown(s, ns, "mismatch");
          await assertManifestUnknown(s, ns, img.digest);
        },
      );

      await t.step("a body that is not JSON is MANIFEST_INVALID", async () => {
        await assertError(
          await putManifest(s, ns, "broken", enc.encode("{not json")),
          400,
          "MANIFEST_INVALID",
        );
        await assertManifestUnknown(s, ns, "broken");
      });

      await t.step("a manifest without config is MANIFEST_INVALID", async () => {
        const body = enc.encode(
          JSON.stringify({ schemaVersion: 2, mediaType: OCI_MANIFEST, layers: [] }),
        );
        await assertError(await putManifest(s, ns, "noconfig", body), 400, "MANIFEST_INVALID");
        await assertManifestUnknown(s, ns, "noconfig");
      });

      await t.step("an index whose manifests is not an array is MANIFEST_INVALID", async () => {
        const body = enc.encode(
          JSON.stringify({ schemaVersion: 2, mediaType: OCI_INDEX, manifests: "nope" }),
        );
        await assertError(
          await putManifest(s, ns, "badidx", body, OCI_INDEX),
          400,
          "MANIFEST_INVALID",
        );
      });

      await t.step("a JSON body that is not an object is MANIFEST_INVALID", async () => {
        for (const text of ["[]", "null", "42", '"s"']) {
          const r = await putManifest(s, ns, "scalar", enc.encode(text));
          await assertError(r, 400, "MANIFEST_INVALID");
        }
      });

      await t.step("a malformed digest reference is DIGEST_INVALID", async () => {
        const img = await image(s, ns, "malformed");
        for (const ref of ["sha256:abc", `sha256:${"G".repeat(64)}`, `md5:${"a".repeat(32)}`]) {
          await assertError(await putManifest(s, ns, ref, img.body), 400, "DIGEST_INVALID");
        }
      });

      await t.step("an invalid tag in the path is refused with 400", async () => {
        const img = await image(s, ns, "badtag");
        for (const ref of ["-lead", ".dot", "x".repeat(129)]) {
          const r = await putManifest(s, ns, ref, img.body);
          assert.equal(r.status, 400, `PUT ${ref}: ${r.status} ${await r.text()}`);
        }
        await assertManifestUnknown(s, ns, img.digest);
      });

      await t.step("PUT by digest whose body hashes differently is DIGEST_INVALID", async () => {
        const img = await image(s, ns, "wrongdigest");
        const other = await sha256(unique("other bytes"));
        await assertError(await putManifest(s, ns, other, img.body), 400, "DIGEST_INVALID");
        await assertManifestUnknown(s, ns, other);
        await assertManifestUnknown(s, ns, img.digest);
      });

      await t.step("PUT and GET by a sha512 digest", async () => {
        const img = await image(s, ns, "sha512");
        const d512 = await sha512(img.body);
        const r = await putManifest(s, ns, d512, img.body);
        assert.equal(r.status, 201, await r.text());
        assert.equal(r.headers.get("docker-content-digest"), d512);
        await assertManifest(s, ns, d512, img.body, OCI_MANIFEST, d512);
      });

      await t.step("a sha512 PUT whose body hashes differently is DIGEST_INVALID", async () => {
        const img = await image(s, ns, "sha512bad");
        const other = await sha512(unique("other"));
        await assertError(await putManifest(s, ns, other, img.body), 400, "DIGEST_INVALID");
        await assertManifestUnknown(s, ns, other);
      });

      await t.step("a manifest may reference a sha512 blob", async () => {
        const layerBytes = unique("sha512 layer");
        const d = await sha512(layerBytes);
        const up = await postBlob(s, ns, d, layerBytes, {
          contentType: "application/octet-stream",
        });
        await up.body?.cancel();
        assert.equal(up.status, 201);
        const cfg = enc.encode(JSON.stringify({ os: "linux", label: "sha512 layer" }));
        await pushBlob(s.url, ns, cfg);
        const body = imageManifest(await descOf(OCI_CONFIG, cfg), [
          { mediaType: OCI_LAYER, digest: d, size: layerBytes.length },
        ]);
        await putManifestOk(s, ns, "layer512", body);
        await assertManifest(s, ns, "layer512", body, OCI_MANIFEST, await sha256(body));
        const blob = await req(s, `/v2/${ns}/blobs/${d}`);
        assert.equal(blob.status, 200);
        assert.deepEqual(await bytesOf(blob), layerBytes);
      });
    }),
});

Deno.test({
  name: "manifest over global.max_manifest_size is 413 MANIFEST_INVALID",
  ...serverTestOpts,
  fn: (t) =>
    withServer({ config: "[global]\nmax_manifest_size = 1024\n" }, async (s) => {
      const ns = "man/size";
      const small = await image(s, ns, "small");
      assert.ok(small.body.length < 1024);

      await t.step("a body under the limit is accepted", async () => {
        await putManifestOk(s, ns, "small", small.body);
      });

      await t.step("a body of exactly the limit is accepted, one byte more is not", async () => {
        const padded = async (total: number) => {
          const base = await image(s, ns, `edge ${total}`, { annotations: { pad: "" } });
          const pad = "x".repeat(total - base.body.length);
          const text = new TextDecoder().decode(base.body).replace('"pad":""', `"pad":"${pad}"`);
          const body = enc.encode(text);
          assert.equal(body.length, total);
          return body;
        };
        const exact = await padded(1024);
        await putManifestOk(s, ns, "exact", exact);
        await assertManifest(s, ns, "exact", exact, OCI_MANIFEST, await sha256(exact));
        const over = await padded(1025);
        await assertError(await putManifest(s, ns, "over", over), 413, "MANIFEST_INVALID");
        await assertManifestUnknown(s, ns, "over");
      });

      await t.step("a chunked body (no Content-Length) over the limit is refused", async () => {
        const big = await image(s, ns, "chunked", {
          annotations: { "org.example.padding": "y".repeat(4096) },
        });
        // A stream body makes fetch send Transfer-Encoding: chunked, so the server must count
        // bytes as they arrive rather than trust a declared length.
        const body = new ReadableStream<Uint8Array>({
          start(c) {
            for (let i = 0; i < big.body.length; i += 512) c.enqueue(big.body.slice(i, i + 512));
            c.close();
          },
        });
        const r = await req(s, `/v2/${ns}/manifests/chunked`, {
          method: "PUT",
          body,
          headers: { "content-type": OCI_MANIFEST },
        });
        await assertError(r, 413, "MANIFEST_INVALID");
        await assertManifestUnknown(s, ns, "chunked");
      });

      await t.step("a chunked body under the limit is accepted", async () => {
        const img = await image(s, ns, "chunked small");
        const body = new ReadableStream<Uint8Array>({
          start(c) {
            c.enqueue(img.body.slice(0, 10));
            c.enqueue(img.body.slice(10));
            c.close();
          },
        });
        const r = await req(s, `/v2/${ns}/manifests/chunked-ok`, {
          method: "PUT",
          body,
          headers: { "content-type": OCI_MANIFEST },
        });
        assert.equal(r.status, 201, await r.text());
        await assertManifest(s, ns, "chunked-ok", img.body, OCI_MANIFEST, img.digest);
      });

      await t.step("a body over the limit is refused and not stored", async () => {
        const big = await image(s, ns, "big", {
          annotations: { "org.example.padding": "x".repeat(2048) },
        });
        assert.ok(big.body.length > 1024);
        await assertError(await putManifest(s, ns, "big", big.body), 413, "MANIFEST_INVALID");
        await assertManifestUnknown(s, ns, "big");
        await assertManifestUnknown(s, ns, big.digest);
      });
    }),
});

Deno.test({
  name: "allow_missing_manifest_references = false requires every reference",
  ...serverTestOpts,
  fn: (t) =>
    withServer({ config: "[global]\nallow_missing_manifest_references = false\n" }, async (s) => {
      const ns = "man/strict";
      const { configBytes, layerBytes, config, layer, body } = await unpushedImage("strict");

      await t.step("missing config and layer give MANIFEST_BLOB_UNKNOWN", async () => {
        await assertError(await putManifest(s, ns, "v1", body), 404, "MANIFEST_BLOB_UNKNOWN");
        await assertManifestUnknown(s, ns, "v1");
      });

      await t.step("a missing layer alone gives MANIFEST_BLOB_UNKNOWN", async () => {
        await pushBlob(s.url, ns, configBytes);
        await assertError(await putManifest(s, ns, "v1", body), 404, "MANIFEST_BLOB_UNKNOWN");
      });

      await t.step("a layer owned only by another namespace is not readable here", async () => {
        await pushBlob(s.url, "man/elsewhere", layerBytes);
        await assertError(await putManifest(s, ns, "v1", body), 404, "MANIFEST_BLOB_UNKNOWN");
      });

      await t.step("a missing config alone gives MANIFEST_BLOB_UNKNOWN", async () => {
        const cfg2 = enc.encode(JSON.stringify({ os: "linux", label: "strict missing config" }));
        await pushBlob(s.url, ns, layerBytes);
        const b = imageManifest(await descOf(OCI_CONFIG, cfg2), [layer]);
        await assertError(await putManifest(s, ns, "v2", b), 404, "MANIFEST_BLOB_UNKNOWN");
        await assertManifestUnknown(s, ns, "v2");
      });

      await t.step("with every blob present the push succeeds", async () => {
        await putManifestOk(s, ns, "v1", body);
        await assertManifest(s, ns, "v1", body, OCI_MANIFEST, await sha256(body));
      });

      const childDigest = await sha256(body);
      const missingChild = imageManifest(config, [await descOf(OCI_LAYER, unique("other"))]);

      await t.step("an index with a missing child gives MANIFEST_BLOB_UNKNOWN", async () => {
        const idx = imageIndex([
          { mediaType: OCI_MANIFEST, digest: childDigest, size: body.length },
          await descOf(OCI_MANIFEST, missingChild),
        ]);
        await assertError(
          await putManifest(s, ns, "idx", idx, OCI_INDEX),
          404,
          "MANIFEST_BLOB_UNKNOWN",
        );
        await assertManifestUnknown(s, ns, "idx");
      });

      await t.step("an index whose children are all present is accepted", async () => {
        const idx = imageIndex([{
          mediaType: OCI_MANIFEST,
          digest: childDigest,
          size: body.length,
        }]);
        await putManifestOk(s, ns, "idx", idx, OCI_INDEX);
        await assertManifest(s, ns, "idx", idx, OCI_INDEX, await sha256(idx));
      });

      await t.step(
        "a subject that does not exist is accepted, with OCI-Subject",
        () => assertAbsentSubjectAccepted(s, ns, config, layer),
      );
    }),
});

Deno.test({
  name: "allow_missing_manifest_references default true: accepted but not made readable",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      const ns = "man/lenient";
      const { configBytes, layerBytes, config, layer, body } = await unpushedImage("lenient");
      // The layer exists in storage, but under another namespace only.
      await pushBlob(s.url, "man/owner", layerBytes);
      const digest = await sha256(body);

      await t.step("a manifest with missing and foreign blobs is accepted", async () => {
        const r = await putManifestOk(s, ns, "v1", body);
        assert.equal(r.headers.get("docker-content-digest"), digest);
        await assertManifest(s, ns, "v1", body, OCI_MANIFEST, digest);
      });

      await t.step("the referenced blobs stay BLOB_UNKNOWN in the namespace", async () => {
        await assertError(await req(s, `/v2/${ns}/blobs/${layer.digest}`), 404, "BLOB_UNKNOWN");
        await assertError(await req(s, `/v2/${ns}/blobs/${config.digest}`), 404, "BLOB_UNKNOWN");
        const head = await req(s, `/v2/${ns}/blobs/${layer.digest}`, { method: "HEAD" });
        assert.equal(head.status, 404);
        await head.body?.cancel();
      });

      await t.step("pushing the content makes it readable", async () => {
        await pushBlob(s.url, ns, layerBytes);
        await pushBlob(s.url, ns, configBytes);
        const l = await req(s, `/v2/${ns}/blobs/${layer.digest}`);
        assert.equal(l.status, 200);
        assert.deepEqual(await bytesOf(l), layerBytes);
        const c = await req(s, `/v2/${ns}/blobs/${config.digest}`);
        assert.equal(c.status, 200);
        assert.deepEqual(await bytesOf(c), configBytes);
      });

      const child = await image(s, ns, "child");
      const idx = imageIndex([
        { mediaType: OCI_MANIFEST, digest: child.digest, size: child.body.length },
      ]);

      await t.step(
        "an index with a missing child is accepted; the child stays unknown",
        async () => {
          await putManifestOk(s, ns, "idx", idx, OCI_INDEX);
          await assertManifest(s, ns, "idx", idx, OCI_INDEX, await sha256(idx));
          await assertManifestUnknown(s, ns, child.digest);
        },
      );

      await t.step("pushing the child by digest makes it pullable", async () => {
        await putManifestOk(s, ns, child.digest, child.body);
        await assertManifest(s, ns, child.digest, child.body, OCI_MANIFEST, child.digest);
      });

      await t.step(
        "a subject that does not exist is accepted, with OCI-Subject",
        () => assertAbsentSubjectAccepted(s, ns, config, layer),
      );
    }),
});

Deno.test({
  name: "tag query parameters on a manifest push",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      const ns = "man/tagparam";

      await t.step(
        "PUT by digest with repeated tag creates each tag, OCI-Tag lists them",
        async () => {
          const img = await image(s, ns, "tagged");
          const r = await putManifest(s, ns, img.digest, img.body, OCI_MANIFEST, "?tag=a&tag=b");
          assert.equal(r.status, 201, await r.text());
          assert.equal(r.headers.get("docker-content-digest"), img.digest);
          assert.equal(r.headers.get("oci-tag"), "a, b");
          await assertManifest(s, ns, "a", img.body, OCI_MANIFEST, img.digest);
          await assertManifest(s, ns, "b", img.body, OCI_MANIFEST, img.digest);
        },
      );

      await t.step("PUT by digest with no tag parameter creates no tag", async () => {
        const img = await image(s, ns, "untagged");
        const r = await putManifest(s, ns, img.digest, img.body);
        assert.equal(r.status, 201, await r.text());
        assert.equal(r.headers.get("oci-tag"), null);
        await assertManifest(s, ns, img.digest, img.body, OCI_MANIFEST, img.digest);
      });

      for (const bad of ["-lead", ".dot", "x".repeat(129), "has%20space", "sl%2Fash"]) {
        await t.step(`an invalid tag parameter (${bad.slice(0, 16)}) is 400`, async () => {
          const img = await image(s, ns, `bad ${bad}`);
          const r = await putManifest(
            s,
            ns,
            img.digest,
            img.body,
            OCI_MANIFEST,
            `?tag=ok&tag=${bad}`,
          );
          assert.equal(r.status, 400, await r.text());
          // Rejected at routing: neither the manifest nor the valid tag beside it is stored.
          await assertManifestUnknown(s, ns, img.digest);
        });
      }

      await t.step("tag parameters on a by-tag push are ignored", async () => {
        const img = await image(s, ns, "bytag");
        const r = await putManifest(s, ns, "main", img.body, OCI_MANIFEST, "?tag=ignored");
        assert.equal(r.status, 201, await r.text());
        const ociTag = r.headers.get("oci-tag");
        assert.ok(ociTag === null || !ociTag.includes("ignored"), `OCI-Tag: ${ociTag}`);
        await assertManifest(s, ns, "main", img.body, OCI_MANIFEST, img.digest);
        await assertManifestUnknown(s, ns, "ignored");
      });

      await t.step("the tag list shows exactly the created tags", async () => {
        const r = await req(s, `/v2/${ns}/tags/list`);
        assert.equal(r.status, 200);
        const body = await r.json();
        assert.deepEqual(body, { name: ns, tags: ["a", "b", "main"] });
      });
    }),
});

Deno.test({
  name: "manifest DELETE by tag and by digest",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      const ns = "man/delete";
      const img = await image(s, ns, "del");
      await putManifestOk(s, ns, "one", img.body);
      await putManifestOk(s, ns, "two", img.body);
      const keep = await image(s, ns, "keep");
      await putManifestOk(s, ns, "keep", keep.body);

      await t.step("DELETE by tag answers 202 and removes only that tag", async () => {
        const r = await req(s, `/v2/${ns}/manifests/one`, { method: "DELETE" });
        assert.equal(r.status, 202);
        await r.body?.cancel();
        await assertManifestUnknown(s, ns, "one");
        await assertManifest(s, ns, "two", img.body, OCI_MANIFEST, img.digest);
        await assertManifest(s, ns, img.digest, img.body, OCI_MANIFEST, img.digest);
      });

      await t.step("DELETE of an unknown tag is MANIFEST_UNKNOWN", async () => {
        const r = await req(s, `/v2/${ns}/manifests/one`, { method: "DELETE" });
        await assertError(r, 404, "MANIFEST_UNKNOWN");
      });

      await t.step("DELETE by digest removes the revision and every tag on it", async () => {
        await putManifestOk(s, ns, "three", img.body);
        const r = await req(s, `/v2/${ns}/manifests/${img.digest}`, { method: "DELETE" });
        assert.equal(r.status, 202);
        await r.body?.cancel();
        await assertManifestUnknown(s, ns, img.digest);
        await assertManifestUnknown(s, ns, "two");
        await assertManifestUnknown(s, ns, "three");
        await assertManifest(s, ns, "keep", keep.body, OCI_MANIFEST, keep.digest);
      });

      await t.step("config and layer blobs stay owned by the namespace", async () => {
        const l = await req(s, `/v2/${ns}/blobs/${img.layer.digest}`);
        assert.equal(l.status, 200);
        await l.body?.cancel();
        const c = await req(s, `/v2/${ns}/blobs/${img.config.digest}`);
        assert.equal(c.status, 200);
        await c.body?.cancel();
      });

      await t.step("the tag list no longer holds the removed tags", async () => {
        const r = await req(s, `/v2/${ns}/tags/list`);
        assert.equal(r.status, 200);
        assert.deepEqual(await r.json(), { name: ns, tags: ["keep"] });
      });

      await t.step("DELETE of an unknown digest is MANIFEST_UNKNOWN", async () => {
        const r = await req(s, `/v2/${ns}/manifests/${img.digest}`, { method: "DELETE" });
        await assertError(r, 404, "MANIFEST_UNKNOWN");
      });

      await t.step("the deleted manifest can be pushed again", async () => {
        await putManifestOk(s, ns, "one", img.body);
        await assertManifest(s, ns, "one", img.body, OCI_MANIFEST, img.digest);
      });
    }),
});

Deno.test({
  name: "image index push with children",
  ...serverTestOpts,
  fn: (t) =>
    withServer({ config: "[global]\nallow_missing_manifest_references = false\n" }, async (s) => {
      const ns = "man/index";
      const amd = await image(s, ns, "amd64");
      const arm = await image(s, ns, "arm64");
      await putManifestOk(s, ns, amd.digest, amd.body);
      await putManifestOk(s, ns, arm.digest, arm.body);
      const idx = imageIndex([
        {
          mediaType: OCI_MANIFEST,
          digest: amd.digest,
          size: amd.body.length,
          platform: { os: "linux", architecture: "amd64" },
        },
        {
          mediaType: OCI_MANIFEST,
          digest: arm.digest,
          size: arm.body.length,
          platform: { os: "linux", architecture: "arm64" },
        },
      ]);
      const idxDigest = await sha256(idx);

      await t.step("PUT the index by tag answers 201", async () => {
        const r = await putManifestOk(s, ns, "multi", idx, OCI_INDEX);
        assert.equal(r.headers.get("docker-content-digest"), idxDigest);
      });

      await t.step("the index is served with the index media type", async () => {
        await assertManifest(s, ns, "multi", idx, OCI_INDEX, idxDigest);
        await assertManifest(s, ns, idxDigest, idx, OCI_INDEX, idxDigest);
      });

      await t.step("each child is pullable by digest", async () => {
        await assertManifest(s, ns, amd.digest, amd.body, OCI_MANIFEST, amd.digest);
        await assertManifest(s, ns, arm.digest, arm.body, OCI_MANIFEST, arm.digest);
      });

      await t.step("an index sent as an image manifest is MANIFEST_INVALID", async () => {
        await assertError(
          await putManifest(s, ns, "wrong", idx, OCI_MANIFEST),
          400,
          "MANIFEST_INVALID",
        );
      });
    }),
});
