// SPEC §Blob upload, Mount rules 1-5, and the two "POST with mount" rows of the upload state
// table: a satisfiable mount is 201 with no session, an unsatisfiable one falls back to 202.
import assert from "node:assert/strict";
import { assertError, postBlob, req, serverTestOpts } from "../helpers/api.ts";
import { randomBytes, sha512 } from "../helpers/bytes.ts";
import { pushBlob, sha256Hex, type TestServer, withServer } from "../helpers/server.ts";

function mount(s: TestServer, ns: string, digest: string, from?: string): Promise<Response> {
  const q = new URLSearchParams({ mount: digest });
  if (from !== undefined) q.set("from", from);
  return req(s, `/v2/${ns}/blobs/uploads/?${q}`, { method: "POST" });
}

/** A satisfied mount: 201, Location of the blob in the target, its digest. */
async function assertMounted(s: TestServer, r: Response, ns: string, digest: string) {
  assert.equal(r.status, 201, `mount into ${ns}: ${r.status}`);
  const loc = r.headers.get("location");
  assert.ok(loc, "Location header missing");
  assert.equal(new URL(loc, s.url).pathname, `/v2/${ns}/blobs/${digest}`);
  assert.equal(r.headers.get("docker-content-digest"), digest);
  await r.body?.cancel();
}

/** An unsatisfied mount: a normal 202 upload session of the target; returns its URL. */
async function assertFallback(s: TestServer, r: Response, ns: string): Promise<URL> {
  assert.equal(r.status, 202, `fallback in ${ns}: ${r.status}`);
  const loc = r.headers.get("location");
  assert.ok(loc, "Location header missing");
  const url = new URL(loc, s.url);
  assert.match(url.pathname, new RegExp(`^/v2/${ns}/blobs/uploads/[^/]+$`));
  assert.equal(r.headers.get("range"), "0-0");
  await r.body?.cancel();
  return url;
}

async function assertBlob(s: TestServer, ns: string, digest: string, data: Uint8Array) {
  const head = await req(s, `/v2/${ns}/blobs/${digest}`, { method: "HEAD" });
  assert.equal(head.status, 200, `HEAD ${ns} ${digest}: ${head.status}`);
  assert.equal(head.headers.get("content-length"), String(data.length));
  assert.equal(head.headers.get("docker-content-digest"), digest);
  await head.body?.cancel();
  const r = await req(s, `/v2/${ns}/blobs/${digest}`);
  assert.equal(r.status, 200, `GET ${ns} ${digest}: ${r.status}`);
  assert.deepEqual(new Uint8Array(await r.arrayBuffer()), data);
}

async function assertNoBlob(s: TestServer, ns: string, digest: string) {
  await assertError(await req(s, `/v2/${ns}/blobs/${digest}`), 404, "BLOB_UNKNOWN");
}

Deno.test({
  name: "blob mount",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      await t.step(
        "mount with from, blob held by the source: 201 and readable in target",
        async () => {
          const data = randomBytes(128);
          const digest = await pushBlob(s.url, "mnt/src", data);
          await assertNoBlob(s, "mnt/dst", digest);
          await assertMounted(s, await mount(s, "mnt/dst", digest, "mnt/src"), "mnt/dst", digest);
          await assertBlob(s, "mnt/dst", digest, data);
        },
      );

      await t.step(
        "mount from a namespace not holding the blob: 202 fallback session",
        async () => {
          const data = randomBytes(96);
          const digest = await pushBlob(s.url, "mnt/owner", data);
          await pushBlob(s.url, "mnt/bystander", randomBytes(8));
          const url = await assertFallback(
            s,
            await mount(s, "mnt/fb", digest, "mnt/bystander"),
            "mnt/fb",
          );
          await assertNoBlob(s, "mnt/fb", digest);
          // The fallback is an ordinary session: the client uploads the bytes itself.
          url.searchParams.set("digest", digest);
          const put = await req(s, url, {
            method: "PUT",
            body: data as BodyInit,
          });
          assert.equal(put.status, 201);
          await put.body?.cancel();
          await assertBlob(s, "mnt/fb", digest, data);
        },
      );

      await t.step("mount from a namespace that never existed: 202 fallback session", async () => {
        const digest = await pushBlob(s.url, "mnt/owner", randomBytes(40));
        await assertFallback(s, await mount(s, "mnt/fb2", digest, "mnt/nowhere"), "mnt/fb2");
        await assertNoBlob(s, "mnt/fb2", digest);
      });

      await t.step("mount without from, some namespace owns the blob: 201", async () => {
        const data = randomBytes(64);
        const digest = await pushBlob(s.url, "mnt/anyowner", data);
        await assertMounted(s, await mount(s, "mnt/nofrom", digest), "mnt/nofrom", digest);
        await assertBlob(s, "mnt/nofrom", digest, data);
      });

      await t.step("mount of an unknown digest: 202 fallback, with and without from", async () => {
        const digest = `sha256:${await sha256Hex(randomBytes(32))}`;
        await assertFallback(s, await mount(s, "mnt/unknown", digest), "mnt/unknown");
        await assertFallback(s, await mount(s, "mnt/unknown", digest, "mnt/src"), "mnt/unknown");
        await assertNoBlob(s, "mnt/unknown", digest);
      });

      await t.step("mount of a blob no namespace owns any more: 202 fallback", async () => {
        const digest = await pushBlob(s.url, "mnt/gone", randomBytes(50));
        const del = await req(s, `/v2/mnt/gone/blobs/${digest}`, { method: "DELETE" });
        assert.equal(del.status, 202);
        await del.body?.cancel();
        await assertFallback(s, await mount(s, "mnt/late", digest), "mnt/late");
        await assertFallback(s, await mount(s, "mnt/late", digest, "mnt/gone"), "mnt/late");
        await assertNoBlob(s, "mnt/late", digest);
      });

      await t.step("a mounted blob stays readable after the source deletes its copy", async () => {
        const data = randomBytes(70);
        const digest = await pushBlob(s.url, "mnt/src2", data);
        await assertMounted(s, await mount(s, "mnt/dst2", digest, "mnt/src2"), "mnt/dst2", digest);
        const del = await req(s, `/v2/mnt/src2/blobs/${digest}`, { method: "DELETE" });
        assert.equal(del.status, 202);
        await del.body?.cancel();
        await assertNoBlob(s, "mnt/src2", digest);
        await assertBlob(s, "mnt/dst2", digest, data);
      });

      await t.step("mount into a namespace already owning the blob: 201", async () => {
        const data = randomBytes(30);
        const digest = await pushBlob(s.url, "mnt/both", data);
        await pushBlob(s.url, "mnt/src3", data);
        await assertMounted(s, await mount(s, "mnt/both", digest, "mnt/src3"), "mnt/both", digest);
        await assertMounted(s, await mount(s, "mnt/both", digest), "mnt/both", digest);
        await assertBlob(s, "mnt/both", digest, data);
      });

      await t.step("mount of a sha512 blob: 201", async () => {
        const data = randomBytes(90);
        const digest = await sha512(data);
        const push = await postBlob(s, "mnt/src512", digest, data);
        assert.equal(push.status, 201);
        await push.body?.cancel();
        await assertMounted(
          s,
          await mount(s, "mnt/dst512", digest, "mnt/src512"),
          "mnt/dst512",
          digest,
        );
        await assertBlob(s, "mnt/dst512", digest, data);
      });

      await t.step("a malformed mount digest: 400 DIGEST_INVALID", async () => {
        const digest = await pushBlob(s.url, "mnt/src4", randomBytes(20));
        const hex = digest.slice("sha256:".length);
        for (const bad of ["sha256:xyz", `sha256:${hex.slice(1)}`, hex, `md5:${hex}`]) {
          await assertError(await mount(s, "mnt/bad", bad, "mnt/src4"), 400, "DIGEST_INVALID");
        }
        await assertError(await mount(s, "mnt/bad", "sha256:xyz"), 400, "DIGEST_INVALID");
      });

      await t.step("a malformed from name: 400 NAME_INVALID", async () => {
        const digest = await pushBlob(s.url, "mnt/src5", randomBytes(20));
        for (const bad of ["Mnt/Src5", "mnt//src5", "mnt/src5/", "-mnt", "mnt/src 5"]) {
          await assertError(await mount(s, "mnt/bad", digest, bad), 400, "NAME_INVALID");
        }
        await assertNoBlob(s, "mnt/bad", digest);
      });
    }),
});
