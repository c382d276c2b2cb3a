// Every commit fits the strictest KV backend (10 checks, 1,000 mutations, 80 KiB of keys, 800 KiB)
// whatever the request holds: many tags in one push, a revision with hundreds of tags, an index
// with thousands of children, an image with hundreds of layers, longest names everywhere. The
// server runs under WHARF_STRICT_KV_LIMITS=1, so a commit past a limit fails its request (a
// 500) and the harness fails the test on the printed violation.
import assert from "node:assert/strict";
import { pushBlob, sha256Hex, type TestServer, withServer } from "../helpers/server.ts";
import { assertError, expectStatus, req, serverTestOpts, tagDigest } from "../helpers/api.ts";

const INDEX = "application/vnd.oci.image.index.v1+json";
const IMAGE = "application/vnd.oci.image.manifest.v1+json";
const enc = new TextEncoder();
/** 255 characters, the longest valid name: the longest keys. */
const LONG_NS = `kv/${"n".repeat(252)}`;

function fakeDigest(i: number): string {
  return `sha256:${i.toString(16).padStart(64, "0")}`;
}

async function putManifest(
  s: TestServer,
  ns: string,
  ref: string,
  doc: unknown,
  mediaType: string,
  query = "",
): Promise<Response> {
  return await req(s, `/v2/${ns}/manifests/${ref}${query}`, {
    method: "PUT",
    body: JSON.stringify(doc),
    headers: { "content-type": mediaType },
  });
}

async function imageDoc(s: TestServer, ns: string, layers: number, salt: string) {
  const config = await pushBlob(s.url, ns, enc.encode(`{"salt":"${salt}"}`));
  return {
    schemaVersion: 2,
    mediaType: IMAGE,
    config: { mediaType: "application/vnd.oci.image.config.v1+json", digest: config, size: 14 },
    layers: Array.from({ length: layers }, (_, i) => ({
      mediaType: "application/vnd.oci.image.layer.v1.tar+gzip",
      digest: fakeDigest(i + 1),
      size: 1,
    })),
  };
}

async function digestOf(doc: unknown): Promise<string> {
  return `sha256:${await sha256Hex(enc.encode(JSON.stringify(doc)))}`;
}

Deno.test(
  "KV limits: tags, references and names of any count fit the commit limits",
  serverTestOpts,
  async (t) => {
    await withServer({}, async (s) => {
      const doc = await imageDoc(s, LONG_NS, 1, "tags");
      const digest = await digestOf(doc);

      await t.step("a push by digest with 300 tag parameters creates every tag", async () => {
        const tags = Array.from({ length: 300 }, (_, i) => `t${i}-${"x".repeat(100)}`);
        const q = "?" + tags.map((x) => `tag=${x}`).join("&");
        const r = await putManifest(s, LONG_NS, digest, doc, IMAGE, q);
        await expectStatus(r, 201, "push with 300 tags");
        assert.equal(r.headers.get("oci-tag")!.split(", ").length, 300);
        for (const tag of [tags[0], tags[61], tags[299]]) {
          assert.equal(await tagDigest(s, LONG_NS, tag), digest, tag);
        }
        const list = await (await req(s, `/v2/${LONG_NS}/tags/list`)).json();
        assert.equal(list.tags.length, 300);
      });

      await t.step("moving 300 tags to another revision in one push", async () => {
        const other = await imageDoc(s, LONG_NS, 1, "moved");
        const otherDigest = await digestOf(other);
        const tags = Array.from({ length: 300 }, (_, i) => `t${i}-${"x".repeat(100)}`);
        const q = "?" + tags.map((x) => `tag=${x}`).join("&");
        await expectStatus(
          await putManifest(s, LONG_NS, otherDigest, other, IMAGE, q),
          201,
          "move",
        );
        assert.equal(await tagDigest(s, LONG_NS, tags[150]), otherDigest);
        const revs = await (await req(s, `/v2/${LONG_NS}/_svc/revisions/list`)).json();
        const old = revs.manifests.find((m: { digest: string }) => m.digest === digest);
        assert.deepEqual(old.tags, [], "no tag still points at the first revision");
      });

      await t.step("deleting a revision with 300 tags removes them all", async () => {
        const tags = Array.from({ length: 300 }, (_, i) => `t${i}-${"x".repeat(100)}`);
        const cur = await tagDigest(s, LONG_NS, tags[0]);
        const r = await req(s, `/v2/${LONG_NS}/manifests/${cur}`, { method: "DELETE" });
        await expectStatus(r, 202, "delete by digest");
        assert.equal(await tagDigest(s, LONG_NS, tags[0]), null);
        assert.equal(await tagDigest(s, LONG_NS, tags[299]), null);
        const list = await (await req(s, `/v2/${LONG_NS}/tags/list`)).json();
        assert.deepEqual(list.tags, []);
      });

      await t.step("more than 1000 distinct tag parameters is a clean 400", async () => {
        const q = "?" + Array.from({ length: 1001 }, (_, i) => `tag=v${i}`).join("&");
        await assertError(await putManifest(s, LONG_NS, digest, doc, IMAGE, q), 400, "UNSUPPORTED");
      });

      await t.step(
        "an image with 600 layers, then a blob delete refused by its reference",
        async () => {
          const big = await imageDoc(s, LONG_NS, 600, "layers");
          await expectStatus(await putManifest(s, LONG_NS, "many-layers", big, IMAGE), 201, "600");
          const cfg = big.config.digest;
          const r = await req(s, `/v2/${LONG_NS}/blobs/${cfg}`, { method: "DELETE" });
          await assertError(r, 405, "DENIED");
          const d = await digestOf(big);
          await expectStatus(
            await req(s, `/v2/${LONG_NS}/manifests/${d}`, { method: "DELETE" }),
            202,
            "delete",
          );
          await expectStatus(
            await req(s, `/v2/${LONG_NS}/blobs/${cfg}`, { method: "DELETE" }),
            202,
            "the config is deletable once no manifest references it",
          );
        },
      );

      await t.step("an index with 3000 children and oversized platform strings", async () => {
        const index = {
          schemaVersion: 2,
          mediaType: INDEX,
          manifests: Array.from({ length: 3000 }, (_, i) => ({
            mediaType: IMAGE,
            digest: fakeDigest(100_000 + i),
            size: 10,
            platform: { os: "l".repeat(i === 0 ? 100_000 : 8), architecture: `arch${i}` },
          })),
        };
        await expectStatus(await putManifest(s, LONG_NS, "wide", index, INDEX), 201, "3000");
        const d = await digestOf(index);
        await expectStatus(
          await req(s, `/v2/${LONG_NS}/manifests/${d}`, { method: "DELETE" }),
          202,
          "delete wide index",
        );
        assert.equal(await tagDigest(s, LONG_NS, "wide"), null);
      });
    });
  },
);

Deno.test(
  "KV limits: strict references with many owned layers",
  serverTestOpts,
  async (t) => {
    await withServer({
      config: `[global]
allow_missing_manifest_references = false
[repository."imm"]
immutable_tags = true
`,
    }, async (s) => {
      await t.step("strict mode: an image with 150 owned layers", async () => {
        const ns = `strict/${"s".repeat(248)}`;
        const layers: string[] = [];
        for (let i = 0; i < 150; i++) layers.push(await pushBlob(s.url, ns, enc.encode(`l${i}`)));
        const config = await pushBlob(s.url, ns, enc.encode("{}"));
        const doc = {
          schemaVersion: 2,
          mediaType: IMAGE,
          config: {
            mediaType: "application/vnd.oci.image.config.v1+json",
            digest: config,
            size: 2,
          },
          layers: layers.map((digest) => ({
            mediaType: "application/vnd.oci.image.layer.v1.tar",
            digest,
            size: 3,
          })),
        };
        await expectStatus(await putManifest(s, ns, "v1", doc, IMAGE), 201, "strict push");
        const r = await req(s, `/v2/${ns}/blobs/${layers[149]}`, { method: "DELETE" });
        await assertError(r, 405, "DENIED");
      });
    });
  },
);

Deno.test(
  "KV limits: LWW and immutable tags stay all-or-nothing with many tags",
  serverTestOpts,
  async (t) => {
    await withServer({ config: `[repository."imm"]\nimmutable_tags = true\n` }, async (s) => {
      await t.step("an immutable tag among 40 refuses the whole push", async () => {
        const ns = "imm/app";
        const first = await imageDoc(s, ns, 1, "first");
        await expectStatus(await putManifest(s, ns, "v39", first, IMAGE), 201, "first");
        const second = await imageDoc(s, ns, 1, "second");
        const q = "?" + Array.from({ length: 40 }, (_, i) => `tag=v${i}`).join("&");
        const r = await putManifest(s, ns, await digestOf(second), second, IMAGE, q);
        await assertError(r, 409, "DENIED");
        assert.equal(await tagDigest(s, ns, "v0"), null, "no tag of the refused push exists");
        assert.equal(await tagDigest(s, ns, "v39"), await digestOf(first));
      });

      await t.step(
        "replicated delete of a revision with 40 tags, one newer: nothing removed",
        async () => {
          const ns = "lww/app";
          const doc = await imageDoc(s, ns, 1, "lww");
          const d = await digestOf(doc);
          const q = "?" + Array.from({ length: 39 }, (_, i) => `tag=old${i}`).join("&");
          await expectStatus(await putManifest(s, ns, d, doc, IMAGE, q), 201, "tags");
          const newer = await req(s, `/v2/${ns}/manifests/newest`, {
            method: "PUT",
            body: JSON.stringify(doc),
            headers: { "content-type": IMAGE, "x-svc-source-timestamp": "2030-01-01T00:00:00Z" },
          });
          await expectStatus(newer, 201, "newer tag");
          const r = await req(s, `/v2/${ns}/manifests/${d}`, {
            method: "DELETE",
            headers: { "x-svc-source-timestamp": "2020-01-01T00:00:00Z" },
          });
          await assertError(r, 409, "REPLICATION_SUPERSEDED");
          assert.equal(await tagDigest(s, ns, "old0"), d);
          assert.equal(await tagDigest(s, ns, "old38"), d);
        },
      );
    });
  },
);

Deno.test(
  "KV limits: pull history of the longest names under a burst of pulls",
  serverTestOpts,
  async () => {
    await withServer({ config: "[global]\nupdate_pull_time = true\n" }, async (s) => {
      const tag = "t".repeat(128);
      const doc = await imageDoc(s, LONG_NS, 1, "pulls");
      await expectStatus(await putManifest(s, LONG_NS, tag, doc, IMAGE), 201, "push");
      const gets = Array.from({ length: 600 }, async () => {
        const r = await req(s, `/v2/${LONG_NS}/manifests/${tag}`);
        await r.body?.cancel();
        return r.status;
      });
      assert.ok((await Promise.all(gets)).every((x) => x === 200));
      // Recordings are batched for up to 20 ms: wait until all have landed.
      let n = 0;
      for (let i = 0; i < 50 && n < 600; i++) {
        await new Promise((r) => setTimeout(r, 100));
        const page = await (await req(s, `/v2/${LONG_NS}/_svc/pulls/list?tag=${tag}&n=1000`))
          .json();
        n = page.entries.length;
      }
      assert.equal(n, 600);
    });
  },
);
