// SPEC §Blob upload (POST/PATCH/PUT/DELETE rules), the upload session state table of §States and
// transitions, and §Limits global.max_blob_size.
import assert from "node:assert/strict";
import { assertError, errorCode, postBlob, req, serverTestOpts } from "../helpers/api.ts";
import { randomBytes, sha256, sha512 } from "../helpers/bytes.ts";
import { type RawResponse, sendRaw } from "../helpers/raw_http.ts";
import { type TestServer, withServer } from "../helpers/server.ts";

const UPLOAD_PATH = /^\/v2\/(.+)\/blobs\/uploads\/([^/]+)$/;

/** A body without Content-Length: fetch sends it with Transfer-Encoding: chunked. */
function chunked(...chunks: Uint8Array[]): { body: ReadableStream<Uint8Array>; duplex: "half" } {
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      for (const ch of chunks) c.enqueue(ch);
      c.close();
    },
  });
  return { body, duplex: "half" };
}

/** Resolves an upload Location and checks it names an upload session of `ns`. */
function uploadUrl(s: TestServer, r: Response, ns: string): URL {
  const loc = r.headers.get("location");
  assert.ok(loc, "Location header missing");
  const url = new URL(loc, s.url);
  assert.equal(url.origin, s.url);
  const m = UPLOAD_PATH.exec(url.pathname);
  assert.ok(m, `not an upload location: ${loc}`);
  assert.equal(m[1], ns);
  return url;
}

function uuidOf(url: URL): string {
  return UPLOAD_PATH.exec(url.pathname)![2];
}

function withDigest(url: URL, digest: string): URL {
  const u = new URL(url);
  u.searchParams.set("digest", digest);
  return u;
}

/** POST with no body: asserts the 202 session start and returns the upload URL. */
async function startUpload(s: TestServer, ns: string, query = ""): Promise<URL> {
  const r = await req(s, `/v2/${ns}/blobs/uploads/${query}`, { method: "POST" });
  assert.equal(r.status, 202, `POST ${ns}${query}: ${r.status}`);
  await r.body?.cancel();
  return uploadUrl(s, r, ns);
}

async function patch(
  s: TestServer,
  url: URL,
  data: Uint8Array,
  contentRange?: string,
): Promise<Response> {
  const headers: Record<string, string> = { "content-type": "application/octet-stream" };
  if (contentRange !== undefined) headers["content-range"] = contentRange;
  return await req(s, url, { method: "PATCH", body: data as BodyInit, headers });
}

/** PATCH that must be accepted; asserts 202 and the committed Range. */
async function patchOk(
  s: TestServer,
  url: URL,
  data: Uint8Array,
  contentRange: string | undefined,
  committed: number,
): Promise<void> {
  const r = await patch(s, url, data, contentRange);
  assert.equal(r.status, 202, `PATCH ${contentRange}: ${r.status}`);
  assert.equal(r.headers.get("range"), `0-${committed - 1}`);
  await r.body?.cancel();
}

/** GET upload status: asserts 204 and returns the Range header. */
async function uploadRange(s: TestServer, url: URL): Promise<string | null> {
  const r = await req(s, url);
  assert.equal(r.status, 204, `upload status: ${r.status}`);
  await r.body?.cancel();
  return r.headers.get("range");
}

async function assertUploadGone(s: TestServer, url: URL): Promise<void> {
  await assertError(await req(s, url), 404, "BLOB_UPLOAD_UNKNOWN");
}

async function putOk(s: TestServer, url: URL, digest: string, init: RequestInit = {}) {
  const r = await req(s, withDigest(url, digest), { method: "PUT", ...init });
  assert.equal(r.status, 201, `PUT ?digest=${digest}: ${r.status}`);
  const ns = UPLOAD_PATH.exec(url.pathname)![1];
  assert.equal(
    new URL(r.headers.get("location") ?? "", s.url).pathname,
    `/v2/${ns}/blobs/${digest}`,
  );
  assert.equal(r.headers.get("docker-content-digest"), digest);
  await r.body?.cancel();
}

async function assertBlob(s: TestServer, ns: string, digest: string, data: Uint8Array) {
  const r = await req(s, `/v2/${ns}/blobs/${digest}`);
  assert.equal(r.status, 200, `GET blob ${ns} ${digest}: ${r.status}`);
  assert.equal(r.headers.get("docker-content-digest"), digest);
  assert.deepEqual(new Uint8Array(await r.arrayBuffer()), data);
}

async function assertNoBlob(s: TestServer, ns: string, digest: string) {
  const r = await req(s, `/v2/${ns}/blobs/${digest}`, { method: "HEAD" });
  assert.equal(r.status, 404, `HEAD blob ${ns} ${digest}: ${r.status}`);
  await r.body?.cancel();
}

/** A PATCH over raw TCP with a verbatim Content-Length, which fetch refuses to produce. */
async function rawPatch(
  s: TestServer,
  url: URL,
  contentLength: string,
  body: Uint8Array,
  halfClose: boolean,
): Promise<RawResponse> {
  const res = await sendRaw(s.port, {
    method: "PATCH",
    target: `${url.pathname}${url.search}`,
    headers: [["Content-Type", "application/octet-stream"], ["Content-Length", contentLength]],
    body,
    framing: "raw",
    halfClose,
  }, 20_000);
  assert.equal(res.error, undefined, `raw PATCH: ${res.error}`);
  assert.ok(res.status > 0, "no HTTP response received");
  return res;
}

Deno.test({
  name: "upload: POST",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      await t.step("POST with no body starts a session: 202, Location, Range 0-0", async () => {
        const r = await req(s, "/v2/up/post/blobs/uploads/", { method: "POST" });
        assert.equal(r.status, 202);
        const url = uploadUrl(s, r, "up/post");
        assert.equal(r.headers.get("range"), "0-0");
        await r.body?.cancel();
        assert.equal(await uploadRange(s, url), "0-0");
      });

      await t.step("two POSTs start two distinct sessions", async () => {
        const a = await startUpload(s, "up/post");
        const b = await startUpload(s, "up/post");
        assert.notEqual(uuidOf(a), uuidOf(b));
      });

      await t.step(
        "POST ?digest with a Content-Length body completes the upload: 201",
        async () => {
          const data = randomBytes(200);
          const digest = await sha256(data);
          const r = await postBlob(s, "up/mono", digest, data, {
            contentType: "application/octet-stream",
          });
          assert.equal(r.status, 201);
          assert.equal(
            new URL(r.headers.get("location") ?? "", s.url).pathname,
            `/v2/up/mono/blobs/${digest}`,
          );
          assert.equal(r.headers.get("docker-content-digest"), digest);
          await r.body?.cancel();
          await assertBlob(s, "up/mono", digest, data);
        },
      );

      await t.step("POST ?digest with sha512 completes a sha512 blob", async () => {
        const data = randomBytes(150);
        const digest = await sha512(data);
        const r = await postBlob(s, "up/mono", digest, data);
        assert.equal(r.status, 201);
        assert.equal(r.headers.get("docker-content-digest"), digest);
        await r.body?.cancel();
        await assertBlob(s, "up/mono", digest, data);
      });

      await t.step("POST ?digest with Content-Length: 0 stores the empty blob: 201", async () => {
        const empty = new Uint8Array(0);
        const digest = await sha256(empty);
        const r = await postBlob(s, "up/empty", digest, empty);
        assert.equal(r.status, 201);
        assert.equal(r.headers.get("docker-content-digest"), digest);
        await r.body?.cancel();
        const head = await req(s, `/v2/up/empty/blobs/${digest}`, { method: "HEAD" });
        assert.equal(head.status, 200);
        assert.equal(head.headers.get("content-length"), "0");
        await head.body?.cancel();
        await assertBlob(s, "up/empty", digest, empty);
      });

      await t.step(
        "POST ?digest with a body hashing elsewhere: 400 DIGEST_INVALID, nothing stored",
        async () => {
          const data = randomBytes(120);
          const claimed = await sha256(randomBytes(120));
          const r = await postBlob(s, "up/bad", claimed, data);
          await assertError(r, 400, "DIGEST_INVALID");
          await assertNoBlob(s, "up/bad", claimed);
          await assertNoBlob(s, "up/bad", await sha256(data));
        },
      );

      await t.step("POST ?digest when the namespace already owns the blob: 201", async () => {
        const data = randomBytes(90);
        const digest = await sha256(data);
        const first = await postBlob(s, "up/owned", digest, data);
        assert.equal(first.status, 201);
        await first.body?.cancel();
        // No body at all: the ownership check answers before any upload would start.
        const again = await postBlob(s, "up/owned", digest);
        assert.equal(again.status, 201);
        assert.equal(again.headers.get("docker-content-digest"), digest);
        assert.equal(
          new URL(again.headers.get("location") ?? "", s.url).pathname,
          `/v2/up/owned/blobs/${digest}`,
        );
        await again.body?.cancel();
        // Repeating the full monolithic push is also 201.
        const third = await postBlob(s, "up/owned", digest, data);
        assert.equal(third.status, 201);
        await third.body?.cancel();
        await assertBlob(s, "up/owned", digest, data);
      });

      await t.step("POST ?digest with a chunked body starts a session closed by PUT", async () => {
        const data = randomBytes(50);
        const digest = await sha256(data);
        const r = await req(s, `/v2/up/chunkpost/blobs/uploads/?digest=${digest}`, {
          method: "POST",
          ...chunked(data.subarray(0, 20), data.subarray(20)),
        });
        assert.equal(r.status, 202);
        const url = uploadUrl(s, r, "up/chunkpost");
        await r.body?.cancel();
        await assertNoBlob(s, "up/chunkpost", digest);
        // SPEC leaves open whether the streamed POST body is committed to the session; close it
        // with whatever part is not committed yet.
        const range = await uploadRange(s, url);
        assert.ok(range === "0-0" || range === "0-49", `unexpected Range ${range}`);
        await putOk(s, url, digest, range === "0-0" ? { body: data as BodyInit } : {});
        await assertBlob(s, "up/chunkpost", digest, data);
        await assertUploadGone(s, url);
      });

      await t.step("POST ?digest that is malformed: 400 DIGEST_INVALID", async () => {
        for (const bad of ["sha256:xyz", "sha256:abc", "md5:d41d8cd98f00b204e9800998ecf8427e"]) {
          const r = await postBlob(s, "up/post", bad, new Uint8Array(0));
          await assertError(r, 400, "DIGEST_INVALID");
        }
      });

      await t.step(
        "digest-algorithm=sha512: closing with a sha256 digest is DIGEST_INVALID",
        async () => {
          const data = randomBytes(64);
          const url = await startUpload(s, "up/algo", "?digest-algorithm=sha512");
          await patchOk(s, url, data, "0-63", 64);
          const digest = await sha256(data);
          const r = await req(s, withDigest(url, digest), { method: "PUT" });
          await assertError(r, 400, "DIGEST_INVALID");
          await assertNoBlob(s, "up/algo", digest);
        },
      );

      await t.step("digest-algorithm=sha512: closing with the sha512 digest is 201", async () => {
        const data = randomBytes(64);
        const url = await startUpload(s, "up/algo", "?digest-algorithm=sha512");
        await patchOk(s, url, data.subarray(0, 30), "0-29", 30);
        await patchOk(s, url, data.subarray(30), "30-63", 64);
        const digest = await sha512(data);
        await putOk(s, url, digest);
        await assertBlob(s, "up/algo", digest, data);
      });

      await t.step("digest-algorithm=sha256 is accepted", async () => {
        const data = randomBytes(10);
        const url = await startUpload(s, "up/algo", "?digest-algorithm=sha256");
        const digest = await sha256(data);
        await putOk(s, url, digest, { body: data as BodyInit });
        await assertBlob(s, "up/algo", digest, data);
      });

      await t.step("digest-algorithm=md5 is unsupported: 400", async () => {
        const r = await req(s, "/v2/up/algo/blobs/uploads/?digest-algorithm=md5", {
          method: "POST",
        });
        assert.equal(r.status, 400);
        const code = await errorCode(r);
        assert.ok(["UNSUPPORTED", "DIGEST_INVALID"].includes(code), code);
      });
    }),
});

Deno.test({
  name: "upload: PATCH",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      await t.step(
        "PATCH resuming at the committed offset: 202, Range, Location, UUID",
        async () => {
          const data = randomBytes(30);
          const url = await startUpload(s, "up/patch");
          const r = await patch(s, url, data.subarray(0, 10), "0-9");
          assert.equal(r.status, 202);
          assert.equal(r.headers.get("range"), "0-9");
          assert.equal(new URL(r.headers.get("location") ?? "", s.url).pathname, url.pathname);
          assert.equal(r.headers.get("docker-upload-uuid"), uuidOf(url));
          await r.body?.cancel();
          await patchOk(s, url, data.subarray(10, 30), "10-29", 30);
          assert.equal(await uploadRange(s, url), "0-29");
          const digest = await sha256(data);
          await putOk(s, url, digest);
          await assertBlob(s, "up/patch", digest, data);
        },
      );

      await t.step(
        "PATCH starting before the committed offset: 416, nothing committed",
        async () => {
          const data = randomBytes(20);
          const url = await startUpload(s, "up/patch");
          await patchOk(s, url, data.subarray(0, 10), "0-9", 10);
          const r = await patch(s, url, data.subarray(5, 15), "5-14");
          await assertError(r, 416, "SIZE_INVALID");
          assert.equal(await uploadRange(s, url), "0-9");
          await patchOk(s, url, data.subarray(10), "10-19", 20);
          const digest = await sha256(data);
          await putOk(s, url, digest);
          await assertBlob(s, "up/patch", digest, data);
        },
      );

      await t.step(
        "PATCH starting after the committed offset: 416, nothing committed",
        async () => {
          const data = randomBytes(20);
          const url = await startUpload(s, "up/patch");
          await patchOk(s, url, data.subarray(0, 10), "0-9", 10);
          const r = await patch(s, url, data.subarray(10), "15-24");
          await assertError(r, 416, "SIZE_INVALID");
          assert.equal(await uploadRange(s, url), "0-9");
        },
      );

      await t.step("PATCH on a fresh session not starting at 0: 416", async () => {
        const data = randomBytes(10);
        const url = await startUpload(s, "up/patch");
        await assertError(await patch(s, url, data, "1-10"), 416, "SIZE_INVALID");
        // Nothing committed: a chunk at 0 is still accepted and is the whole blob.
        await patchOk(s, url, data, "0-9", 10);
        const digest = await sha256(data);
        await putOk(s, url, digest);
        await assertBlob(s, "up/patch", digest, data);
      });

      await t.step(
        "Content-Range disagreeing with Content-Length: 416, nothing committed",
        async () => {
          const data = randomBytes(10);
          const url = await startUpload(s, "up/patch");
          await assertError(await patch(s, url, data.subarray(0, 5), "0-9"), 416, "SIZE_INVALID");
          await assertError(await patch(s, url, data, "0-4"), 416, "SIZE_INVALID");
          await patchOk(s, url, data, "0-9", 10);
          const digest = await sha256(data);
          await putOk(s, url, digest);
          await assertBlob(s, "up/patch", digest, data);
        },
      );

      await t.step("Content-Range with the bytes= unit: 416", async () => {
        const data = randomBytes(10);
        const url = await startUpload(s, "up/patch");
        await assertError(await patch(s, url, data, "bytes=0-9"), 416, "SIZE_INVALID");
        await assertError(await patch(s, url, data, "bytes 0-9/10"), 416, "SIZE_INVALID");
        assert.equal(await uploadRange(s, url), "0-0");
      });

      await t.step("PATCH without Content-Range appends to the session", async () => {
        const data = randomBytes(45);
        const url = await startUpload(s, "up/append");
        await patchOk(s, url, data.subarray(0, 15), undefined, 15);
        await patchOk(s, url, data.subarray(15, 30), undefined, 30);
        assert.equal(await uploadRange(s, url), "0-29");
        const digest = await sha256(data);
        await putOk(s, url, digest, { body: data.subarray(30) as BodyInit });
        await assertBlob(s, "up/append", digest, data);
      });

      await t.step("chunked PATCH without Content-Range streams to EOF", async () => {
        const data = randomBytes(3000);
        const url = await startUpload(s, "up/stream");
        const r = await req(s, url, {
          method: "PATCH",
          headers: { "content-type": "application/octet-stream" },
          ...chunked(data.subarray(0, 1000), data.subarray(1000, 2000), data.subarray(2000)),
        });
        assert.equal(r.status, 202);
        assert.equal(r.headers.get("range"), "0-2999");
        await r.body?.cancel();
        const digest = await sha256(data);
        await putOk(s, url, digest);
        await assertBlob(s, "up/stream", digest, data);
      });

      await t.step("chunked PATCH filling its Content-Range window: 202", async () => {
        const data = randomBytes(100);
        const url = await startUpload(s, "up/stream");
        const r = await req(s, url, {
          method: "PATCH",
          headers: { "content-type": "application/octet-stream", "content-range": "0-99" },
          ...chunked(data.subarray(0, 60), data.subarray(60)),
        });
        assert.equal(r.status, 202);
        assert.equal(r.headers.get("range"), "0-99");
        await r.body?.cancel();
        const digest = await sha256(data);
        await putOk(s, url, digest);
        await assertBlob(s, "up/stream", digest, data);
      });

      await t.step(
        "chunked PATCH not filling its window: 416 and the session is cancelled",
        async () => {
          const url = await startUpload(s, "up/stream");
          const r = await req(s, url, {
            method: "PATCH",
            headers: { "content-type": "application/octet-stream", "content-range": "0-99" },
            ...chunked(randomBytes(40)),
          });
          await assertError(r, 416, "SIZE_INVALID");
          await assertUploadGone(s, url);
        },
      );

      await t.step("invalid Content-Length: 400", async () => {
        const url = await startUpload(s, "up/rawcl");
        for (const cl of ["abc", "-5", "1x"]) {
          const res = await rawPatch(s, url, cl, new Uint8Array(0), false);
          assert.equal(res.status, 400, `Content-Length: ${cl}`);
        }
        assert.equal(await uploadRange(s, url), "0-0");
      });

      await t.step(
        "short body commits what arrived (202 Range 0-39); PUT refuses the digest",
        async () => {
          const data = randomBytes(100);
          const url = await startUpload(s, "up/short");
          const res = await rawPatch(s, url, "100", data.subarray(0, 40), true);
          assert.equal(res.status, 202);
          assert.equal(res.headers.get("range"), "0-39");
          assert.equal(await uploadRange(s, url), "0-39");
          const digest = await sha256(data);
          const put = await req(s, withDigest(url, digest), { method: "PUT" });
          await assertError(put, 400, "DIGEST_INVALID");
          await assertNoBlob(s, "up/short", digest);
        },
      );
    }),
});

Deno.test({
  name: "upload: status, PUT, DELETE and unknown sessions",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      await t.step("GET upload status: 204 with Range, Location and UUID, no body", async () => {
        const url = await startUpload(s, "up/status");
        const fresh = await req(s, url);
        assert.equal(fresh.status, 204);
        assert.equal(fresh.headers.get("range"), "0-0");
        assert.equal(new URL(fresh.headers.get("location") ?? "", s.url).pathname, url.pathname);
        assert.equal(fresh.headers.get("docker-upload-uuid"), uuidOf(url));
        assert.equal((await fresh.arrayBuffer()).byteLength, 0);

        await patchOk(s, url, randomBytes(10), "0-9", 10);
        const r = await req(s, url);
        assert.equal(r.status, 204);
        assert.equal(r.headers.get("range"), "0-9");
        assert.equal(new URL(r.headers.get("location") ?? "", s.url).pathname, url.pathname);
        assert.equal(r.headers.get("docker-upload-uuid"), uuidOf(url));
        assert.equal((await r.arrayBuffer()).byteLength, 0);
      });

      await t.step(
        "PUT with a final chunk completes: 201, Location, digest; session gone",
        async () => {
          const data = randomBytes(25);
          const url = await startUpload(s, "up/put");
          await patchOk(s, url, data.subarray(0, 10), "0-9", 10);
          const digest = await sha256(data);
          await putOk(s, url, digest, {
            body: data.subarray(10) as BodyInit,
            headers: { "content-type": "application/octet-stream" },
          });
          await assertBlob(s, "up/put", digest, data);
          await assertUploadGone(s, url);
        },
      );

      await t.step("PUT with a chunked final chunk streams to EOF", async () => {
        const data = randomBytes(2048);
        const url = await startUpload(s, "up/put");
        await patchOk(s, url, data.subarray(0, 1000), "0-999", 1000);
        const digest = await sha256(data);
        await putOk(s, url, digest, chunked(data.subarray(1000, 1500), data.subarray(1500)));
        await assertBlob(s, "up/put", digest, data);
      });

      await t.step("PUT without a body closes the committed bytes", async () => {
        const data = randomBytes(40);
        const url = await startUpload(s, "up/put");
        await patchOk(s, url, data, "0-39", 40);
        const digest = await sha256(data);
        await putOk(s, url, digest);
        await assertBlob(s, "up/put", digest, data);
      });

      await t.step("POST then a single PUT with the whole body (monolithic two-step)", async () => {
        const data = randomBytes(77);
        const url = await startUpload(s, "up/put");
        const digest = await sha256(data);
        await putOk(s, url, digest, { body: data as BodyInit });
        await assertBlob(s, "up/put", digest, data);
      });

      await t.step("POST then PUT with no body and no chunk stores the empty blob", async () => {
        const empty = new Uint8Array(0);
        const url = await startUpload(s, "up/putempty");
        const digest = await sha256(empty);
        await putOk(s, url, digest);
        await assertBlob(s, "up/putempty", digest, empty);
      });

      await t.step("PUT with a digest the bytes do not hash to: 400 DIGEST_INVALID", async () => {
        const data = randomBytes(33);
        const url = await startUpload(s, "up/putbad");
        await patchOk(s, url, data, "0-32", 33);
        const wrong = await sha256(randomBytes(33));
        await assertError(
          await req(s, withDigest(url, wrong), { method: "PUT" }),
          400,
          "DIGEST_INVALID",
        );
        await assertNoBlob(s, "up/putbad", wrong);
        await assertNoBlob(s, "up/putbad", await sha256(data));
      });

      await t.step("PUT with a malformed digest: 400 DIGEST_INVALID", async () => {
        const url = await startUpload(s, "up/putbad");
        await patchOk(s, url, randomBytes(5), "0-4", 5);
        await assertError(
          await req(s, withDigest(url, "sha256:nothex"), { method: "PUT" }),
          400,
          "DIGEST_INVALID",
        );
      });

      await t.step("PUT without a digest parameter: 400", async () => {
        const url = await startUpload(s, "up/putbad");
        const r = await req(s, url, { method: "PUT", body: randomBytes(5) as BodyInit });
        assert.equal(r.status, 400);
        const code = await errorCode(r);
        assert.ok(["DIGEST_INVALID", "UNSUPPORTED"].includes(code), code);
      });

      await t.step(
        "DELETE cancels the session: later GET/PATCH/PUT are BLOB_UPLOAD_UNKNOWN",
        async () => {
          const data = randomBytes(12);
          const url = await startUpload(s, "up/cancel");
          await patchOk(s, url, data, "0-11", 12);
          const del = await req(s, url, { method: "DELETE" });
          assert.ok(del.status >= 200 && del.status < 300, `DELETE upload: ${del.status}`);
          await del.body?.cancel();
          await assertUploadGone(s, url);
          await assertError(await patch(s, url, data), 404, "BLOB_UPLOAD_UNKNOWN");
          const digest = await sha256(data);
          await assertError(
            await req(s, withDigest(url, digest), { method: "PUT" }),
            404,
            "BLOB_UPLOAD_UNKNOWN",
          );
          await assertError(await req(s, url, { method: "DELETE" }), 404, "BLOB_UPLOAD_UNKNOWN");
          await assertNoBlob(s, "up/cancel", digest);
        },
      );

      await t.step("an unknown upload uuid: 404 BLOB_UPLOAD_UNKNOWN for every method", async () => {
        const url = new URL(`/v2/up/unknown/blobs/uploads/${crypto.randomUUID()}`, s.url);
        const digest = await sha256(new Uint8Array(0));
        await assertUploadGone(s, url);
        await assertError(await patch(s, url, randomBytes(4), "0-3"), 404, "BLOB_UPLOAD_UNKNOWN");
        await assertError(
          await req(s, withDigest(url, digest), { method: "PUT" }),
          404,
          "BLOB_UPLOAD_UNKNOWN",
        );
        await assertError(await req(s, url, { method: "DELETE" }), 404, "BLOB_UPLOAD_UNKNOWN");
      });

      await t.step(
        "an upload uuid used under another namespace: 404 BLOB_UPLOAD_UNKNOWN",
        async () => {
          const data = randomBytes(8);
          const url = await startUpload(s, "up/mine");
          await patchOk(s, url, data, "0-7", 8);
          const foreign = new URL(`/v2/up/theirs/blobs/uploads/${uuidOf(url)}`, s.url);
          const digest = await sha256(data);
          await assertUploadGone(s, foreign);
          await assertError(await patch(s, foreign, data, "8-15"), 404, "BLOB_UPLOAD_UNKNOWN");
          await assertError(
            await req(s, withDigest(foreign, digest), { method: "PUT" }),
            404,
            "BLOB_UPLOAD_UNKNOWN",
          );
          await assertError(
            await req(s, foreign, { method: "DELETE" }),
            404,
            "BLOB_UPLOAD_UNKNOWN",
          );
          await assertNoBlob(s, "up/theirs", digest);
          // The session is untouched in its own namespace.
          assert.equal(await uploadRange(s, url), "0-7");
          await putOk(s, url, digest);
          await assertBlob(s, "up/mine", digest, data);
        },
      );
    }),
});

Deno.test({
  name: "upload: global.max_blob_size",
  ...serverTestOpts,
  fn: (t) =>
    withServer({ config: "[global]\nmax_blob_size = 1000\n" }, async (s) => {
      await t.step("a single PATCH above the limit: 413 BLOB_UPLOAD_INVALID", async () => {
        const url = await startUpload(s, "up/max");
        await assertError(await patch(s, url, randomBytes(1001)), 413, "BLOB_UPLOAD_INVALID");
      });

      await t.step("cumulative PATCHes above the limit: 413 BLOB_UPLOAD_INVALID", async () => {
        const url = await startUpload(s, "up/max");
        await patchOk(s, url, randomBytes(600), "0-599", 600);
        const r = await patch(s, url, randomBytes(600), "600-1199");
        await assertError(r, 413, "BLOB_UPLOAD_INVALID");
      });

      await t.step(
        "a chunked PATCH streaming past the limit: 413 BLOB_UPLOAD_INVALID",
        async () => {
          const url = await startUpload(s, "up/max");
          const r = await req(s, url, {
            method: "PATCH",
            ...chunked(randomBytes(500), randomBytes(500), randomBytes(500)),
          });
          await assertError(r, 413, "BLOB_UPLOAD_INVALID");
        },
      );

      await t.step(
        "a final PUT chunk pushing past the limit: 413 BLOB_UPLOAD_INVALID",
        async () => {
          const data = randomBytes(1200);
          const url = await startUpload(s, "up/max");
          await patchOk(s, url, data.subarray(0, 600), "0-599", 600);
          const digest = await sha256(data);
          const r = await req(s, withDigest(url, digest), {
            method: "PUT",
            body: data.subarray(600) as BodyInit,
          });
          await assertError(r, 413, "BLOB_UPLOAD_INVALID");
          await assertNoBlob(s, "up/max", digest);
        },
      );

      await t.step("exactly the limit through PATCHes is accepted", async () => {
        const data = randomBytes(1000);
        const url = await startUpload(s, "up/max");
        await patchOk(s, url, data.subarray(0, 400), "0-399", 400);
        await patchOk(s, url, data.subarray(400), "400-999", 1000);
        const digest = await sha256(data);
        await putOk(s, url, digest);
        await assertBlob(s, "up/max", digest, data);
      });

      await t.step(
        "a monolithic POST above the limit: 413 BLOB_UPLOAD_INVALID, nothing stored",
        async () => {
          const data = randomBytes(1001);
          const digest = await sha256(data);
          const r = await postBlob(s, "up/maxmono", digest, data);
          await assertError(r, 413, "BLOB_UPLOAD_INVALID");
          await assertNoBlob(s, "up/maxmono", digest);
        },
      );

      await t.step("a monolithic POST of exactly the limit is accepted", async () => {
        const data = randomBytes(1000);
        const digest = await sha256(data);
        const r = await postBlob(s, "up/maxmono", digest, data);
        assert.equal(r.status, 201);
        await r.body?.cancel();
        await assertBlob(s, "up/maxmono", digest, data);
      });
    }),
});
