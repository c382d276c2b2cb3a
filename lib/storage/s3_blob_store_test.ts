import assert from "node:assert/strict";
import { S3Error } from "./s3_client.ts";
import { blobStoreContract } from "../../tests/helpers/blob_store_contract.ts";
import { startS3, type TestS3 } from "../../tests/helpers/s3_server.ts";
import { MIN_PART_SIZE, S3BlobStore, type S3StoreSettings } from "./s3_blob_store.ts";
import { ConcurrentUploadError } from "./blob_store.ts";

/** A store's settings on the test S3 server, under `keyPrefix`. */
function settingsOn(s3: TestS3, keyPrefix = `t-${crypto.randomUUID()}`): S3StoreSettings {
  return {
    endpoint: s3.endpoint,
    bucket: s3.bucket,
    region: "us-east-1",
    accessKeyId: s3.accessKeyId,
    secretKey: s3.secretKey,
    pathStyle: true,
    keyPrefix,
    partSize: MIN_PART_SIZE,
    presignTtlSecs: 60,
  };
}

let s3: TestS3 | null = null;
let users = 0;

blobStoreContract("s3", async () => {
  users++;
  s3 ??= await startS3();
  // every test gets its own prefix: an empty store on the one server
  const store = new S3BlobStore(settingsOn(s3));
  await store.init();
  return {
    store,
    partSize: MIN_PART_SIZE,
    cleanup: async () => {
      if (--users === 0 && s3) {
        await s3.close();
        s3 = null;
      }
    },
  };
}, { sanitize: false });

Deno.test({
  name: "s3 store: an assembly cut short leaves a marker; deleteUpload aborts the multipart upload",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const s3 = await startS3();
    try {
      const prefix = `t-${crypto.randomUUID()}`;
      const store = new S3BlobStore(settingsOn(s3, prefix));
      const uuid = crypto.randomUUID();
      const data = new Uint8Array(MIN_PART_SIZE + 10).fill(9);
      await store.appendUpload(uuid, 0, ReadableStream.from([data]), {
        maxBytes: data.length,
        onChunk: () => {},
      });
      // A process dies after starting the assembly: the multipart upload and its marker stay.
      const dst = `${prefix}/blobs/sha256/00/${"0".repeat(64)}`;
      const uploadId = await store.client.createMultipart(dst);
      await store.client.put(
        `${prefix}/uploads/${uuid}/mpu`,
        new TextEncoder().encode(JSON.stringify({ key: dst, uploadId })),
      );
      const listed = [];
      for await (const u of store.listUploads()) listed.push(u.name);
      assert.deepEqual(listed, [uuid], "scrub sees the session's objects as one upload");
      const aborted: [string, string][] = [];
      const abort = store.client.abortMultipart.bind(store.client);
      store.client.abortMultipart = (key, id) => {
        aborted.push([key, id]);
        return abort(key, id);
      };
      await store.deleteUpload(uuid);
      assert.deepEqual(aborted, [[dst, uploadId]]);
      for await (const u of store.listUploads()) assert.fail(`left: ${u.name}`);
      assert.equal(await store.exists(`sha256:${"0".repeat(64)}`), false);
    } finally {
      await s3.close();
    }
  },
});

Deno.test({
  name: "s3 store: S3 checks the signature (wrong secret → refused, not retried) and presigns",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const s3 = await startS3();
    try {
      const settings = settingsOn(s3, "sig");
      const bad = new S3BlobStore({ ...settings, secretKey: "not-the-secret" });
      const t0 = Date.now();
      await assert.rejects(bad.init(), (e: Error) => e instanceof S3Error && e.status === 403);
      assert.ok(Date.now() - t0 < 2000, "a refusal is not retried");
      const good = new S3BlobStore(settings);
      const d = `sha256:${"a".repeat(64)}`;
      await good.put(d, new TextEncoder().encode("presigned"));
      const url = await good.presign(d, { contentType: "application/x-test" });
      const r = await fetch(url);
      assert.equal(r.status, 200);
      assert.equal(r.headers.get("content-type"), "application/x-test");
      assert.equal(await r.text(), "presigned");
      const forged = await fetch(url.replace("sig/blobs", "sig/blobz"));
      await forged.body?.cancel();
      assert.equal(forged.status, 403);
    } finally {
      await s3.close();
    }
  },
});

Deno.test({
  name: "s3 store: two processes writing one session: completion refuses bytes it did not hash",
  sanitizeOps: false,
  sanitizeResources: false,
  async fn() {
    const s3 = await startS3();
    try {
      const settings = settingsOn(s3);
      // two store instances: what two server processes on one bucket have
      const a = new S3BlobStore(settings);
      const b = new S3BlobStore(settings);
      await a.init();
      const append = (store: S3BlobStore, uuid: string, offset: number, data: Uint8Array) =>
        store.appendUpload(uuid, offset, ReadableStream.from([data]), {
          maxBytes: data.length,
          onChunk: () => {},
        });
      const digestOf = async (d: Uint8Array) =>
        `sha256:${
          Array.from(
            new Uint8Array(await crypto.subtle.digest("SHA-256", d as BufferSource)),
            (x) => x.toString(16).padStart(2, "0"),
          ).join("")
        }`;
      const x = new Uint8Array(1000).fill(1);
      const y = new Uint8Array(1000).fill(2);

      // A's PATCH won (its offset committed), B's lost but its part landed last.
      const uuid = crypto.randomUUID();
      await append(a, uuid, 0, x);
      await append(b, uuid, 0, y);
      await assert.rejects(
        a.commitUpload(uuid, await digestOf(x), x.length),
        ConcurrentUploadError,
      );
      assert.equal(await a.exists(await digestOf(x)), false, "nothing stored under x's digest");

      // A later chunk resuming inside the overwritten part is refused too.
      const uuid2 = crypto.randomUUID();
      await append(a, uuid2, 0, x);
      await append(b, uuid2, 0, y);
      await assert.rejects(append(a, uuid2, x.length, x), ConcurrentUploadError);

      // One writer per step, in turn on either process (what a load balancer does), is fine:
      // the second process reads the parts before it writes (its rehash), so it knows them.
      const uuid3 = crypto.randomUUID();
      await append(a, uuid3, 0, x);
      for await (const _ of await b.readUpload(uuid3, x.length)) { /* the rehash */ }
      await append(b, uuid3, x.length, y);
      const both = new Uint8Array([...x, ...y]);
      for await (const _ of await a.readUpload(uuid3, both.length)) { /* the rehash */ }
      await a.commitUpload(uuid3, await digestOf(both), both.length);
      const stored = await a.readAll(await digestOf(both));
      assert.deepEqual(stored, both);
    } finally {
      await s3.close();
    }
  },
});
