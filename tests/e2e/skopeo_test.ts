// skopeo (containers/image) against a real Wharf process: push, inspect, list, multi-arch with
// preserved digests, referrers of a pushed artifact, pull back to a layout byte for byte,
// cross-namespace mounts, deletes, and a restart on the same data directory.
// The content is the realistic OCI layout from ../shared/tools/make-images.sh, built once here.
import assert from "node:assert/strict";
import { assertErrorCode, req } from "../helpers/api.ts";
import { startServer, type TestServer, withServer } from "../helpers/server.ts";
import {
  assertPullMatchesLayout,
  assertSameLayoutBlobs,
  buildImages,
  type Images,
  layoutRefs,
  missingTools,
  readBlob,
  skopeo,
  skopeoOk,
} from "./_skopeo.ts";

const skipReason = missingTools();
const images: Images | null = skipReason ? null : await buildImages();
// Test bodies can fail at any step; the layout must go whatever happens.
globalThis.addEventListener("unload", () => images?.cleanup());

// The server's log pump outlives each test body's bookkeeping; withServer stops and awaits it.
const base = { ignore: skipReason !== null, sanitizeOps: false, sanitizeResources: false };

function img(): Images {
  assert.ok(images, "test images were not built");
  return images;
}

function docker(s: TestServer, ref: string): string {
  return `docker://127.0.0.1:${s.port}/${ref}`;
}

function oci(dir: string, ref: string): string {
  return `oci:${dir}:${ref}`;
}

/** skopeo copy from this module's layout into the registry. */
function push(s: TestServer, ref: string, dest: string, extra: string[] = []) {
  return skopeoOk(
    ["copy", "--dest-tls-verify=false", ...extra, oci(img().layout, ref), docker(s, dest)],
    s,
  );
}

/** skopeo copy from the registry into an OCI layout, keeping digests. */
function pull(s: TestServer, src: string, dir: string, ref: string) {
  return skopeoOk(
    [
      "copy",
      "--src-tls-verify=false",
      "--all",
      "--preserve-digests",
      docker(s, src),
      oci(dir, ref),
    ],
    s,
  );
}

async function withTempDir(fn: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-e2e-pull-" });
  try {
    await fn(dir);
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
}

Deno.test({
  ...base,
  name: "skopeo: push an image, inspect it, inspect --raw, list-tags",
  fn: () =>
    withServer({}, async (s) => {
      const im = img();
      await push(s, "v1", "e2e/app:v1");

      const r = await skopeoOk(["inspect", "--tls-verify=false", docker(s, "e2e/app:v1")], s);
      const info = JSON.parse(r.stdout);
      assert.equal(info.Digest, im.v1.digest);
      assert.deepEqual(info.Layers, im.v1.layers);
      assert.deepEqual(info.RepoTags, ["v1"]);
      assert.equal(info.Os, "linux");
      assert.equal(info.Architecture, im.refs.ARCH);

      const raw = await skopeo(["inspect", "--raw", "--tls-verify=false", docker(s, "e2e/app:v1")]);
      assert.equal(raw.code, 0, raw.stderr);
      assert.equal(raw.stdout, new TextDecoder().decode(await readBlob(im.layout, im.v1.digest)));

      const cfg = await skopeoOk(
        ["inspect", "--config", "--raw", "--tls-verify=false", docker(s, "e2e/app:v1")],
        s,
      );
      assert.equal(cfg.stdout, new TextDecoder().decode(await readBlob(im.layout, im.v1.config)));

      // A second tag on the same content, pushed by skopeo too.
      await push(s, "v1", "e2e/app:latest");
      const tags = await skopeoOk(["list-tags", "--tls-verify=false", docker(s, "e2e/app")], s);
      const list = JSON.parse(tags.stdout);
      assert.equal(list.Repository, `127.0.0.1:${s.port}/e2e/app`);
      assert.deepEqual([...list.Tags].sort(), ["latest", "v1"]);

      // What skopeo saw is what a plain HTTP client gets.
      await assertPullMatchesLayout(s, "e2e/app", "v1", im.layout, im.v1.digest);
    }),
});

Deno.test({
  ...base,
  name: "skopeo: multi-platform index pushed with --all keeps its digest",
  fn: () =>
    withServer({}, async (s) => {
      const im = img();
      await push(s, "multi", "e2e/multi:multi", ["--all", "--preserve-digests"]);

      const head = await req(s, "/v2/e2e/multi/manifests/multi", {
        method: "HEAD",
        headers: { accept: "application/vnd.oci.image.index.v1+json" },
      });
      assert.equal(head.status, 200);
      assert.equal(head.headers.get("docker-content-digest"), im.multi.digest);
      assert.equal(head.headers.get("content-type"), "application/vnd.oci.image.index.v1+json");
      await head.body?.cancel();

      const raw = await skopeoOk(
        ["inspect", "--raw", "--tls-verify=false", docker(s, "e2e/multi:multi")],
        s,
      );
      assert.equal(
        raw.stdout,
        new TextDecoder().decode(await readBlob(im.layout, im.multi.digest)),
      );

      // Each platform manifest is reachable by digest, with its config and layers.
      for (const d of [im.multi.amd64, im.multi.arm64]) {
        await assertPullMatchesLayout(s, "e2e/multi", d, im.layout, d);
        const one = await skopeoOk(
          ["inspect", "--raw", "--tls-verify=false", docker(s, `e2e/multi@${d}`)],
          s,
        );
        assert.equal(one.stdout, new TextDecoder().decode(await readBlob(im.layout, d)));
      }
      // And the index by its own digest, recursively.
      await assertPullMatchesLayout(s, "e2e/multi", im.multi.digest, im.layout, im.multi.digest);
    }),
});

Deno.test({
  ...base,
  name: "skopeo: a pushed artifact with a subject is listed by the referrers API",
  fn: () =>
    withServer({}, async (s) => {
      const im = img();
      await push(s, "v1", "e2e/app:v1");
      await push(s, "sbom", "e2e/app:sbom", ["--preserve-digests"]);
      const sbom = JSON.parse(new TextDecoder().decode(await readBlob(im.layout, im.sbom.digest)));
      assert.equal(sbom.subject.digest, im.v1.digest, "layout precondition: sbom -> v1");

      const r = await req(s, `/v2/e2e/app/referrers/${im.v1.digest}`);
      assert.equal(r.status, 200);
      assert.equal(
        r.headers.get("content-type")?.split(";")[0],
        "application/vnd.oci.image.index.v1+json",
      );
      const index = await r.json();
      assert.equal(index.schemaVersion, 2);
      assert.equal(index.mediaType, "application/vnd.oci.image.index.v1+json");
      assert.deepEqual(index.manifests, [{
        mediaType: "application/vnd.oci.image.manifest.v1+json",
        digest: im.sbom.digest,
        size: im.sbom.size,
        artifactType: im.sbom.artifactType,
        annotations: sbom.annotations,
      }]);

      const hit = await req(
        s,
        `/v2/e2e/app/referrers/${im.v1.digest}?artifactType=${
          encodeURIComponent(im.sbom.artifactType)
        }`,
      );
      assert.equal(hit.status, 200);
      assert.deepEqual((await hit.json()).manifests.map((d: { digest: string }) => d.digest), [
        im.sbom.digest,
      ]);
      const miss = await req(
        s,
        `/v2/e2e/app/referrers/${im.v1.digest}?artifactType=application%2Fvnd.example.other`,
      );
      assert.equal(miss.status, 200);
      assert.deepEqual((await miss.json()).manifests, []);

      // Referrers are per namespace: another namespace holding v1 has none.
      await push(s, "v1", "e2e/other:v1");
      const other = await req(s, `/v2/e2e/other/referrers/${im.v1.digest}`);
      assert.equal(other.status, 200);
      assert.deepEqual((await other.json()).manifests, []);
    }),
});

Deno.test({
  ...base,
  name: "skopeo: copy back to an OCI layout gives the same blobs byte for byte",
  fn: () =>
    withServer({}, async (s) => {
      const im = img();
      await push(s, "v1", "e2e/rt:v1");
      await push(s, "multi", "e2e/rt:multi", ["--all", "--preserve-digests"]);
      await push(s, "sbom", "e2e/rt:sbom", ["--preserve-digests"]);
      await withTempDir(async (dir) => {
        for (const ref of ["v1", "multi", "sbom"]) await pull(s, `e2e/rt:${ref}`, dir, ref);
        assert.deepEqual(await layoutRefs(dir), await layoutRefs(im.layout));
        await assertSameLayoutBlobs(im.layout, dir);
      });
    }),
});

Deno.test({
  ...base,
  name: "skopeo: copy across namespaces mounts the layers and keeps digests",
  fn: () =>
    withServer({}, async (s) => {
      const im = img();
      await push(s, "v1", "e2e/a:v1");
      const r = await skopeoOk([
        "--debug",
        "copy",
        "--src-tls-verify=false",
        "--dest-tls-verify=false",
        "--preserve-digests",
        docker(s, "e2e/a:v1"),
        docker(s, "e2e/b:v1"),
      ], s);
      // containers/image mounts each layer its blob-info cache (under /var/lib/containers or
      // ~/.local/share/containers, written by the push above) places in e2e/a. A refused mount
      // would silently upload the bytes instead, so count the mounts the server accepted.
      const mounted = im.v1.layers.filter((d) =>
        r.stderr.includes(`mount=${encodeURIComponent(d)}`)
      );
      assert.deepEqual(
        mounted,
        im.v1.layers,
        "skopeo did not try to mount every layer (is its blob-info cache writable?)",
      );
      assert.equal(
        (r.stderr.match(/mount OK/g) ?? []).length,
        im.v1.layers.length,
        `server refused a mount:\n${
          r.stderr.split("\n").filter((l) => /mount/i.test(l)).join("\n")
        }`,
      );

      await assertPullMatchesLayout(s, "e2e/b", "v1", im.layout, im.v1.digest);
      const info = JSON.parse(
        (await skopeoOk(["inspect", "--tls-verify=false", docker(s, "e2e/b:v1")], s)).stdout,
      );
      assert.equal(info.Digest, im.v1.digest);
      assert.deepEqual(info.Layers, im.v1.layers);
      // The source is untouched.
      await assertPullMatchesLayout(s, "e2e/a", "v1", im.layout, im.v1.digest);
    }),
});

Deno.test({
  ...base,
  name: "skopeo: delete by tag and by digest removes the manifest",
  fn: () =>
    withServer({}, async (s) => {
      const im = img();
      await push(s, "v1", "e2e/del:v1");
      await push(s, "multi", "e2e/del:multi", ["--all", "--preserve-digests"]);

      // skopeo resolves the tag and deletes the revision it points at.
      await skopeoOk(["delete", "--tls-verify=false", docker(s, "e2e/del:v1")], s);
      await assertErrorCode(await req(s, "/v2/e2e/del/manifests/v1"), 404, "MANIFEST_UNKNOWN");
      await assertErrorCode(
        await req(s, `/v2/e2e/del/manifests/${im.v1.digest}`),
        404,
        "MANIFEST_UNKNOWN",
      );
      const tags = await req(s, "/v2/e2e/del/tags/list");
      assert.equal(tags.status, 200);
      assert.deepEqual(await tags.json(), { name: "e2e/del", tags: ["multi"] });

      await skopeoOk(
        ["delete", "--tls-verify=false", docker(s, `e2e/del@${im.multi.digest}`)],
        s,
      );
      await assertErrorCode(
        await req(s, `/v2/e2e/del/manifests/${im.multi.digest}`),
        404,
        "MANIFEST_UNKNOWN",
      );
      await assertErrorCode(await req(s, "/v2/e2e/del/manifests/multi"), 404, "MANIFEST_UNKNOWN");
      const inspect = await skopeo([
        "inspect",
        "--raw",
        "--tls-verify=false",
        docker(s, "e2e/del:multi"),
      ]);
      assert.notEqual(inspect.code, 0, "skopeo still inspects a deleted manifest");

      // The child manifests were pushed as their own revisions and are still there.
      const child = await req(s, `/v2/e2e/del/manifests/${im.multi.amd64}`, { method: "HEAD" });
      assert.equal(child.status, 200);
      await child.body?.cancel();
    }),
});

Deno.test({
  ...base,
  name: "skopeo: content survives a server restart on the same data directory",
  fn: async () => {
    const im = img();
    let s = await startServer();
    const dataDir = s.dataDir;
    try {
      await push(s, "v1", "e2e/keep:v1");
      await push(s, "multi", "e2e/keep:multi", ["--all", "--preserve-digests"]);
      await push(s, "sbom", "e2e/keep:sbom", ["--preserve-digests"]);
      await s.stop();
      s = await startServer({ dataDir });

      const tags = await skopeoOk(["list-tags", "--tls-verify=false", docker(s, "e2e/keep")], s);
      assert.deepEqual([...JSON.parse(tags.stdout).Tags].sort(), ["multi", "sbom", "v1"]);
      await withTempDir(async (dir) => {
        for (const ref of ["v1", "multi", "sbom"]) await pull(s, `e2e/keep:${ref}`, dir, ref);
        assert.deepEqual(await layoutRefs(dir), await layoutRefs(im.layout));
        await assertSameLayoutBlobs(im.layout, dir);
      });
      const ref = await req(s, `/v2/e2e/keep/referrers/${im.v1.digest}`);
      assert.equal(ref.status, 200);
      assert.deepEqual((await ref.json()).manifests.map((d: { digest: string }) => d.digest), [
        im.sbom.digest,
      ]);
    } finally {
      await s.stop();
      await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    }
  },
});
