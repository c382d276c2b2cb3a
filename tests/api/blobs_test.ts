// SPEC §Blobs: HEAD/GET/DELETE of blobs, GET Range rules 1-7, namespace ownership, and the
// blob row of the tag and manifest lifecycle table (DELETE while referenced → 405 DENIED).
import assert from "node:assert/strict";
import { assertError, bytesOf, postBlob, req, serverTestOpts } from "../helpers/api.ts";
import { randomBytes, sha512Hex } from "../helpers/bytes.ts";
import { pushBlob, pushImage, sha256Hex, withServer } from "../helpers/server.ts";

Deno.test({
  name: "blob HEAD, GET and ownership",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      const data = randomBytes(100);
      const digest = await pushBlob(s.url, "blobs/get", data);

      await t.step("HEAD answers 200 with length, digest and Accept-Ranges, no body", async () => {
        const r = await req(s, `/v2/blobs/get/blobs/${digest}`, { method: "HEAD" });
        assert.equal(r.status, 200);
        assert.equal(r.headers.get("content-length"), "100");
        assert.equal(r.headers.get("docker-content-digest"), digest);
        assert.equal(r.headers.get("accept-ranges"), "bytes");
        assert.equal((await r.arrayBuffer()).byteLength, 0);
      });

      await t.step("GET answers 200 with the blob bytes", async () => {
        const r = await req(s, `/v2/blobs/get/blobs/${digest}`);
        assert.equal(r.status, 200);
        assert.equal(r.headers.get("content-length"), "100");
        assert.equal(r.headers.get("docker-content-digest"), digest);
        assert.equal(r.headers.get("accept-ranges"), "bytes");
        assert.deepEqual(await bytesOf(r), data);
      });

      await t.step("a blob pushed to one namespace is BLOB_UNKNOWN in another", async () => {
        const get = await req(s, `/v2/blobs/other/blobs/${digest}`);
        await assertError(get, 404, "BLOB_UNKNOWN");
        const head = await req(s, `/v2/blobs/other/blobs/${digest}`, { method: "HEAD" });
        assert.equal(head.status, 404);
        assert.equal((await head.arrayBuffer()).byteLength, 0);
      });

      await t.step("a well-formed digest stored nowhere is BLOB_UNKNOWN", async () => {
        const unknown = `sha256:${await sha256Hex(randomBytes(16))}`;
        await assertError(await req(s, `/v2/blobs/get/blobs/${unknown}`), 404, "BLOB_UNKNOWN");
        const head = await req(s, `/v2/blobs/get/blobs/${unknown}`, { method: "HEAD" });
        assert.equal(head.status, 404);
        await head.body?.cancel();
      });

      await t.step(
        "pushing the same bytes to a second namespace makes them readable there",
        async () => {
          await pushBlob(s.url, "blobs/second", data);
          const r = await req(s, `/v2/blobs/second/blobs/${digest}`);
          assert.equal(r.status, 200);
          assert.deepEqual(await bytesOf(r), data);
        },
      );

      await t.step("sha512 blobs are pushed and served under their sha512 digest", async () => {
        const d = randomBytes(300);
        const dg = `sha512:${await sha512Hex(d)}`;
        const push = await postBlob(s, "blobs/sha512", dg, d, {
          contentType: "application/octet-stream",
        });
        assert.equal(push.status, 201);
        assert.equal(push.headers.get("docker-content-digest"), dg);
        await push.body?.cancel();

        const head = await req(s, `/v2/blobs/sha512/blobs/${dg}`, { method: "HEAD" });
        assert.equal(head.status, 200);
        assert.equal(head.headers.get("content-length"), "300");
        assert.equal(head.headers.get("docker-content-digest"), dg);
        await head.body?.cancel();

        const get = await req(s, `/v2/blobs/sha512/blobs/${dg}`);
        assert.equal(get.status, 200);
        assert.equal(get.headers.get("docker-content-digest"), dg);
        assert.deepEqual(await bytesOf(get), d);

        const part = await req(s, `/v2/blobs/sha512/blobs/${dg}`, {
          headers: { range: "bytes=10-19" },
        });
        assert.equal(part.status, 206);
        assert.equal(part.headers.get("content-range"), "bytes 10-19/300");
        assert.deepEqual(await bytesOf(part), d.subarray(10, 20));

        // The same bytes under their sha256 name were never pushed to this namespace.
        const as256 = `sha256:${await sha256Hex(d)}`;
        await assertError(await req(s, `/v2/blobs/sha512/blobs/${as256}`), 404, "BLOB_UNKNOWN");

        const del = await req(s, `/v2/blobs/sha512/blobs/${dg}`, { method: "DELETE" });
        assert.equal(del.status, 202);
        await del.body?.cancel();
        await assertError(await req(s, `/v2/blobs/sha512/blobs/${dg}`), 404, "BLOB_UNKNOWN");
      });
    }),
});

Deno.test({
  name: "blob GET Range rules",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      const data = randomBytes(100);
      const digest = await pushBlob(s.url, "blobs/range", data);
      const path = `/v2/blobs/range/blobs/${digest}`;

      const partial = async (range: string, start: number, end: number) => {
        const r = await req(s, path, { headers: { range } });
        assert.equal(r.status, 206, `Range ${range}`);
        assert.equal(r.headers.get("content-range"), `bytes ${start}-${end}/100`);
        assert.equal(r.headers.get("content-length"), String(end - start + 1));
        assert.deepEqual(await bytesOf(r), data.subarray(start, end + 1));
      };
      const full = async (range: string) => {
        const r = await req(s, path, { headers: { range } });
        assert.equal(r.status, 200, `Range ${range}`);
        assert.equal(r.headers.get("content-range"), null);
        assert.equal(r.headers.get("content-length"), "100");
        assert.deepEqual(await bytesOf(r), data);
      };
      const unsatisfiable = async (range: string) => {
        const r = await req(s, path, { headers: { range } });
        await assertError(r, 416, "SIZE_INVALID");
      };

      await t.step("rule 1: bytes=start-end gives 206 with that window", async () => {
        await partial("bytes=10-19", 10, 19);
        await partial("bytes=0-0", 0, 0);
        await partial("bytes=0-99", 0, 99);
      });

      await t.step("rule 1: an end beyond the blob is clamped to the final byte", async () => {
        await partial("bytes=90-1000", 90, 99);
        await partial("bytes=99-100", 99, 99);
      });

      await t.step("rule 2: bytes=start- gives 206 from start to the end", async () => {
        await partial("bytes=95-", 95, 99);
        await partial("bytes=0-", 0, 99);
      });

      await t.step("rule 3: bytes=-suffix gives 206 with the final bytes", async () => {
        await partial("bytes=-5", 95, 99);
        await partial("bytes=-1", 99, 99);
      });

      await t.step(
        "rule 3: a suffix longer than the blob gives the whole blob as 206",
        async () => {
          await partial("bytes=-1000", 0, 99);
          await partial("bytes=-100", 0, 99);
        },
      );

      await t.step("rule 4: multiple ranges are ignored with a full 200", async () => {
        await full("bytes=0-1,5-6");
        await full("bytes=0-9, 20-29");
      });

      await t.step("rule 5: an unknown unit is ignored with 200", async () => {
        await full("items=0-9");
      });

      await t.step("rule 5: a missing unit is ignored with 200", async () => {
        await full("0-9");
      });

      await t.step("rule 5: a non-numeric bound is ignored with 200", async () => {
        await full("bytes=a-9");
        await full("bytes=0-x");
        await full("bytes=-z");
      });

      await t.step("rule 5: an inverted window is ignored with 200", async () => {
        await full("bytes=20-10");
      });

      await t.step("rule 6: a start at the blob length gives 416", async () => {
        await unsatisfiable("bytes=100-");
        await unsatisfiable("bytes=100-120");
      });

      await t.step("rule 6: a start beyond the blob length gives 416", async () => {
        await unsatisfiable("bytes=150-200");
        await unsatisfiable("bytes=1000-");
      });

      await t.step("rule 6: a zero-length suffix gives 416", async () => {
        await unsatisfiable("bytes=-0");
      });

      await t.step("rule 7: an empty blob ignores a valid range with an empty 200", async () => {
        const empty = await pushBlob(s.url, "blobs/range", new Uint8Array(0));
        for (const range of ["bytes=0-10", "bytes=0-", "bytes=-5", "bytes=5-9"]) {
          const r = await req(s, `/v2/blobs/range/blobs/${empty}`, { headers: { range } });
          assert.equal(r.status, 200, `Range ${range}`);
          assert.equal(r.headers.get("content-length"), "0");
          assert.equal(r.headers.get("docker-content-digest"), empty);
          assert.equal((await r.arrayBuffer()).byteLength, 0);
        }
      });
    }),
});

Deno.test({
  name: "blob DELETE",
  ...serverTestOpts,
  fn: (t) =>
    withServer({}, async (s) => {
      await t.step("DELETE answers 202, then GET and HEAD answer 404 BLOB_UNKNOWN", async () => {
        const digest = await pushBlob(s.url, "del/plain", randomBytes(64));
        const del = await req(s, `/v2/del/plain/blobs/${digest}`, { method: "DELETE" });
        assert.equal(del.status, 202);
        await del.body?.cancel();
        await assertError(await req(s, `/v2/del/plain/blobs/${digest}`), 404, "BLOB_UNKNOWN");
        const head = await req(s, `/v2/del/plain/blobs/${digest}`, { method: "HEAD" });
        assert.equal(head.status, 404);
        await head.body?.cancel();
        // A second delete finds no ownership left.
        const again = await req(s, `/v2/del/plain/blobs/${digest}`, { method: "DELETE" });
        await assertError(again, 404, "BLOB_UNKNOWN");
      });

      await t.step("DELETE removes only that namespace's ownership", async () => {
        const data = randomBytes(64);
        const digest = await pushBlob(s.url, "del/one", data);
        await pushBlob(s.url, "del/two", data);
        const del = await req(s, `/v2/del/one/blobs/${digest}`, { method: "DELETE" });
        assert.equal(del.status, 202);
        await del.body?.cancel();
        await assertError(await req(s, `/v2/del/one/blobs/${digest}`), 404, "BLOB_UNKNOWN");
        const r = await req(s, `/v2/del/two/blobs/${digest}`);
        assert.equal(r.status, 200);
        assert.deepEqual(await bytesOf(r), data);
      });

      await t.step(
        "DELETE of a blob a manifest references answers 405 DENIED, unchanged",
        async () => {
          const layer = randomBytes(80);
          const img = await pushImage(s.url, "del/ref", "v1", { layer });
          for (const digest of [img.layer, img.config]) {
            const del = await req(s, `/v2/del/ref/blobs/${digest}`, { method: "DELETE" });
            await assertError(del, 405, "DENIED");
            const r = await req(s, `/v2/del/ref/blobs/${digest}`);
            assert.equal(r.status, 200);
            await r.body?.cancel();
          }
          const r = await req(s, `/v2/del/ref/blobs/${img.layer}`);
          assert.equal(r.status, 200);
          assert.deepEqual(await bytesOf(r), layer);
        },
      );

      await t.step(
        "once the referencing manifest is deleted the blob DELETE answers 202",
        async () => {
          const img = await pushImage(s.url, "del/unref", "v1");
          const delManifest = await req(s, `/v2/del/unref/manifests/${img.digest}`, {
            method: "DELETE",
          });
          assert.equal(delManifest.status, 202);
          await delManifest.body?.cancel();
          const del = await req(s, `/v2/del/unref/blobs/${img.layer}`, { method: "DELETE" });
          assert.equal(del.status, 202);
          await del.body?.cancel();
          await assertError(await req(s, `/v2/del/unref/blobs/${img.layer}`), 404, "BLOB_UNKNOWN");
        },
      );

      await t.step(
        "a reference from another namespace's manifest does not block DELETE",
        async () => {
          const layer = randomBytes(72);
          const img = await pushImage(s.url, "del/holder", "v1", { layer });
          await pushBlob(s.url, "del/loose", layer);
          const del = await req(s, `/v2/del/loose/blobs/${img.layer}`, { method: "DELETE" });
          assert.equal(del.status, 202);
          await del.body?.cancel();
          await assertError(await req(s, `/v2/del/loose/blobs/${img.layer}`), 404, "BLOB_UNKNOWN");
          const r = await req(s, `/v2/del/holder/blobs/${img.layer}`);
          assert.equal(r.status, 200);
          assert.deepEqual(await bytesOf(r), layer);
        },
      );

      await t.step("DELETE of an unknown blob answers 404 BLOB_UNKNOWN", async () => {
        const unknown = `sha256:${await sha256Hex(randomBytes(16))}`;
        const del = await req(s, `/v2/del/plain/blobs/${unknown}`, { method: "DELETE" });
        await assertError(del, 404, "BLOB_UNKNOWN");
      });

      await t.step("DELETE of a blob owned only elsewhere answers 404 BLOB_UNKNOWN", async () => {
        const data = randomBytes(48);
        const digest = await pushBlob(s.url, "del/owner", data);
        const del = await req(s, `/v2/del/stranger/blobs/${digest}`, { method: "DELETE" });
        await assertError(del, 404, "BLOB_UNKNOWN");
        const r = await req(s, `/v2/del/owner/blobs/${digest}`);
        assert.equal(r.status, 200);
        assert.deepEqual(await bytesOf(r), data);
      });
    }),
});
