// SPEC §API version check, `ns` query parameter: a pull naming a namespace that a repository
// declares is served from that repository (path prefixed by the repository name) with
// `OCI-Namespace`; an undeclared `ns`, and `ns` on any write, is ignored and sends no header.
import assert from "node:assert/strict";
import { assertError, bytesOf, postBlob, req, serverTestOpts } from "../helpers/api.ts";
import { distinctManifest, OCI_MANIFEST, putManifest } from "../helpers/oci_content.ts";
import { pushImage, sha256Hex, type TestServer, withServer } from "../helpers/server.ts";

const enc = new TextEncoder();
const CONFIG = `[repository."hub"]
namespace = "docker.io"
`;

/** GETs a manifest and checks it is `body`; returns the response headers. */
async function getManifest(s: TestServer, path: string, body: Uint8Array): Promise<Headers> {
  const r = await req(s, path);
  assert.equal(r.status, 200, `GET ${path}`);
  assert.equal(r.headers.get("content-type"), OCI_MANIFEST);
  assert.equal(r.headers.get("docker-content-digest"), `sha256:${await sha256Hex(body)}`);
  assert.deepEqual(await bytesOf(r), body);
  return r.headers;
}

Deno.test({
  name: "ns parameter on pulls",
  ...serverTestOpts,
  fn: (t) =>
    withServer({ config: CONFIG }, async (s) => {
      const hub = await pushImage(s.url, "hub/library/alpine", "x");
      const local = await pushImage(s.url, "library/alpine", "x");
      await pushImage(s.url, "library/alpine", "onlylocal");
      const single = await pushImage(s.url, "hub/alpine", "3");

      await t.step("a declared ns serves the manifest from the repository", async () => {
        const h = await getManifest(s, "/v2/library/alpine/manifests/x?ns=docker.io", hub.body);
        assert.equal(h.get("oci-namespace"), "docker.io");
      });

      await t.step("HEAD with a declared ns answers from the repository too", async () => {
        const r = await req(s, "/v2/library/alpine/manifests/x?ns=docker.io", { method: "HEAD" });
        assert.equal(r.status, 200);
        assert.equal(r.headers.get("oci-namespace"), "docker.io");
        assert.equal(r.headers.get("docker-content-digest"), hub.digest);
        assert.equal(r.headers.get("content-length"), String(hub.body.length));
        assert.equal((await r.arrayBuffer()).byteLength, 0);
      });

      await t.step("by digest, with a declared ns", async () => {
        const h = await getManifest(
          s,
          `/v2/library/alpine/manifests/${hub.digest}?ns=docker.io`,
          hub.body,
        );
        assert.equal(h.get("oci-namespace"), "docker.io");
      });

      await t.step("a one-segment path maps under the repository as well", async () => {
        const h = await getManifest(s, "/v2/alpine/manifests/3?ns=docker.io", single.body);
        assert.equal(h.get("oci-namespace"), "docker.io");
      });

      await t.step("blobs are served from the repository with a declared ns", async () => {
        const r = await req(s, `/v2/library/alpine/blobs/${hub.layer}?ns=docker.io`);
        assert.equal(r.status, 200);
        assert.equal(r.headers.get("oci-namespace"), "docker.io");
        assert.equal(r.headers.get("docker-content-digest"), hub.layer);
        await r.body?.cancel();
        const head = await req(s, `/v2/library/alpine/blobs/${hub.config}?ns=docker.io`, {
          method: "HEAD",
        });
        assert.equal(head.status, 200);
        assert.equal(head.headers.get("oci-namespace"), "docker.io");
        await head.body?.cancel();
      });

      await t.step("the repository's content is not reachable without ns", async () => {
        const r = await req(s, `/v2/library/alpine/blobs/${hub.layer}`);
        assert.equal(r.headers.get("oci-namespace"), null);
        await assertError(r, 404, "BLOB_UNKNOWN");
      });

      await t.step("with a declared ns, the path's own namespace is not consulted", async () => {
        const r = await req(s, "/v2/library/alpine/manifests/onlylocal?ns=docker.io");
        await assertError(r, 404, "MANIFEST_UNKNOWN");
      });

      await t.step("without ns the path's namespace is served, no header", async () => {
        const h = await getManifest(s, "/v2/library/alpine/manifests/x", local.body);
        assert.equal(h.get("oci-namespace"), null);
      });

      await t.step("an undeclared ns is ignored and sends no header", async () => {
        for (const ns of ["quay.io", "hub", "docker.io.evil", ""]) {
          const path = `/v2/library/alpine/manifests/x?ns=${encodeURIComponent(ns)}`;
          const h = await getManifest(s, path, local.body);
          assert.equal(h.get("oci-namespace"), null, `ns=${ns}`);
        }
      });
    }),
});

Deno.test({
  name: "ns parameter on writes is ignored",
  ...serverTestOpts,
  fn: (t) =>
    withServer({ config: CONFIG }, async (s) => {
      const m = await distinctManifest("written with ns");

      await t.step("a manifest PUT with a declared ns lands in the path's namespace", async () => {
        const r = await putManifest(
          s,
          "library/alpine",
          "w",
          m.body,
          OCI_MANIFEST,
          "?ns=docker.io",
        );
        assert.equal(r.status, 201, await r.clone().text());
        assert.equal(r.headers.get("oci-namespace"), null);
        assert.equal(r.headers.get("docker-content-digest"), m.digest);
        await r.body?.cancel();
        await getManifest(s, "/v2/library/alpine/manifests/w", m.body);
        // That namespace holds nothing at all: either 404 code fits (NAME_ or MANIFEST_UNKNOWN).
        const other = await req(s, "/v2/hub/library/alpine/manifests/w");
        assert.equal(other.status, 404);
        await other.body?.cancel();
      });

      await t.step("a pull with the declared ns then does not find it", async () => {
        const r = await req(s, "/v2/library/alpine/manifests/w?ns=docker.io");
        assert.equal(r.status, 404);
        await r.body?.cancel();
      });

      await t.step("a blob upload with a declared ns lands in the path's namespace", async () => {
        const data = enc.encode(`blob ${crypto.randomUUID()}`);
        const digest = `sha256:${await sha256Hex(data)}`;
        const r = await postBlob(s, "library/alpine", digest, data, {
          contentType: "application/octet-stream",
          query: "&ns=docker.io",
        });
        assert.equal(r.status, 201);
        assert.equal(r.headers.get("oci-namespace"), null);
        await r.body?.cancel();
        const got = await req(s, `/v2/library/alpine/blobs/${digest}`);
        assert.equal(got.status, 200);
        assert.deepEqual(await bytesOf(got), data);
        await assertError(
          await req(s, `/v2/hub/library/alpine/blobs/${digest}`),
          404,
          "BLOB_UNKNOWN",
        );
      });

      await t.step("a DELETE with a declared ns acts on the path's namespace", async () => {
        const hub = await pushImage(s.url, "hub/library/alpine", "d");
        const local = await pushImage(s.url, "library/alpine", "d");
        const r = await req(s, "/v2/library/alpine/manifests/d?ns=docker.io", { method: "DELETE" });
        assert.equal(r.status, 202);
        assert.equal(r.headers.get("oci-namespace"), null);
        await r.body?.cancel();
        const gone = await req(s, "/v2/library/alpine/manifests/d");
        await assertError(gone, 404, "MANIFEST_UNKNOWN");
        await getManifest(s, "/v2/hub/library/alpine/manifests/d", hub.body);
        assert.notEqual(hub.digest, local.digest);
      });
    }),
});
