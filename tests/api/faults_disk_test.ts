// A full disk under a running server (issue 38 item 1), on a 24 MiB tmpfs holding both the blob
// directory and the KV file: pushes answer 503 PROVIDER_UNAVAILABLE naming the store and the
// cause with Retry-After, a failed PATCH leaves the session at its committed offset with the
// partial bytes removed, /readyz says not_ready while /healthz stays 200, and once space returns
// the same session completes without a restart. With a reserve, new uploads are refused before
// the disk is full while deletes and metadata commits go on.
import assert from "node:assert/strict";
import { join } from "node:path";
import { assertUnavailable, req, serverTestOpts } from "../helpers/api.ts";
import { sha256 } from "../helpers/bytes.ts";
import { ignoreWithoutSmallFs, mountSmallFs, type SmallFs } from "../helpers/small_fs.ts";
import { pushImage, runCli, startServer, type TestServer } from "../helpers/server.ts";

const MIB = 1 << 20;

/** `n` bytes no other call gives (a crypto.getRandomValues call fills 64 KiB at most). */
function blob(n: number): Uint8Array {
  const seed = crypto.getRandomValues(new Uint8Array(4));
  return new Uint8Array(n).map((_, i) => (i * 31 + seed[i & 3] + (i >> 11)) & 0xff);
}

async function readyz(s: TestServer): Promise<{ status: number; body: Record<string, string> }> {
  const r = await req(s, "/readyz");
  return { status: r.status, body: await r.json() };
}

async function openSession(s: TestServer, ns: string): Promise<string> {
  const r = await req(s, `/v2/${ns}/blobs/uploads/`, { method: "POST" });
  await r.body?.cancel();
  assert.equal(r.status, 202);
  return r.headers.get("location")!;
}

function patch(s: TestServer, loc: string, data: Uint8Array, start: number) {
  return req(s, loc, {
    method: "PATCH",
    body: data as BodyInit,
    headers: {
      "content-type": "application/octet-stream",
      "content-range": `${start}-${start + data.length - 1}`,
    },
  });
}

async function committed(s: TestServer, loc: string): Promise<string | null> {
  const r = await req(s, loc);
  await r.body?.cancel();
  return r.headers.get("range");
}

/** Names of the upload files on disk (sessions and interrupted writes). */
async function uploadFiles(dataDir: string): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for await (const e of Deno.readDir(join(dataDir, "blobs", "uploads"))) {
    out.set(e.name, (await Deno.stat(join(dataDir, "blobs", "uploads", e.name))).size);
  }
  return out;
}

async function metric(s: TestServer, line: RegExp): Promise<number> {
  const text = await (await req(s, "/metrics")).text();
  const m = text.split("\n").find((l) => line.test(l));
  return m ? Number(m.split(" ").pop()) : NaN;
}

async function withSmallServer(
  config: string,
  fn: (s: TestServer, fs: SmallFs) => Promise<void>,
): Promise<void> {
  const fs = await mountSmallFs(24 * MIB);
  let s: TestServer | null = null;
  try {
    s = await startServer({ dataDir: fs.dir, config });
    await fn(s, fs);
  } finally {
    await s?.stop();
    await fs.close();
  }
}

Deno.test({
  name: "disk full: pushes answer 503 with the cause, the session keeps its committed bytes, " +
    "/readyz says so, and the same session completes once space returns",
  ignore: ignoreWithoutSmallFs("the disk-full tests"),
  ...serverTestOpts,
  async fn() {
    // No reserve: the writes themselves meet ENOSPC.
    await withSmallServer("[blob_store]\nmin_free_bytes = 0\n", async (s, fs) => {
      const data = blob(3 * MIB);
      const digest = await sha256(data);
      const loc = await openSession(s, "full/app");
      const uuid = loc.split("/").pop()!;
      const p1 = await patch(s, loc, data.subarray(0, MIB), 0);
      await p1.body?.cancel();
      assert.equal(p1.status, 202);

      await fs.fill();
      const p2 = await patch(s, loc, data.subarray(MIB), MIB);
      const detail = await assertUnavailable(
        p2,
        /^the blob store \(.*\) is full \(no space left on device\): retry later$/,
      );
      assert.ok(detail.includes(join(fs.dir, "blobs")), detail);
      // The session is where its last acknowledged chunk left it, its partial append removed.
      assert.equal(await committed(s, loc), `0-${MIB - 1}`);
      assert.equal((await uploadFiles(fs.dir)).get(uuid), MIB);

      // A monolithic push and a manifest fail the same way and leave no file behind.
      const other = blob(2 * MIB);
      const mono = await req(s, `/v2/full/app/blobs/uploads/?digest=${await sha256(other)}`, {
        method: "POST",
        body: other as BodyInit,
      });
      await assertUnavailable(mono, /is full \(no space left on device\)/);
      assert.deepEqual([...(await uploadFiles(fs.dir)).keys()], [uuid]);
      const man = await req(s, "/v2/full/app/manifests/v1", {
        method: "PUT",
        headers: { "content-type": "application/vnd.oci.image.manifest.v1+json" },
        body: JSON.stringify({
          schemaVersion: 2,
          mediaType: "application/vnd.oci.image.manifest.v1+json",
          config: { mediaType: "application/vnd.oci.empty.v1+json", digest, size: data.length },
          layers: [],
          annotations: { pad: "x".repeat(5000) },
        }),
      });
      await assertUnavailable(man, /is full/);

      const ready = await readyz(s);
      assert.equal(ready.status, 503);
      assert.equal(ready.body.status, "not_ready");
      assert.match(ready.body.error, /blob store .* is full/);
      assert.equal((await req(s, "/healthz")).status, 200, "liveness is not readiness");
      // (the manifest may meet the full disk in the KV first, which holds small bodies inline)
      assert.ok(await metric(s, /^wharf_store_refusals_total\{store="blob",cause="full"\}/) >= 2);
      assert.equal(await metric(s, /^wharf_store_available\{store="blob"\}/), 0);

      // Space returns: the same session resumes at its offset and completes, no restart.
      await fs.drain();
      const p3 = await patch(s, loc, data.subarray(MIB), MIB);
      await p3.body?.cancel();
      assert.equal(p3.status, 202);
      const put = await req(s, `${loc}?digest=${digest}`, { method: "PUT" });
      await put.body?.cancel();
      assert.equal(put.status, 201);
      const got = await req(s, `/v2/full/app/blobs/${digest}`);
      assert.deepEqual(new Uint8Array(await got.arrayBuffer()), data);
      assert.equal((await readyz(s)).status, 200);
      assert.equal(await metric(s, /^wharf_store_available\{store="blob"\}/), 1);
      await pushImage(s.url, "full/app", "after");
    });
  },
});

Deno.test({
  name: "disk full: below [blob_store] min_free_bytes new uploads are refused before the disk " +
    "is full, while deletes and scrub's commits go on; above it again, pushes work",
  ignore: ignoreWithoutSmallFs("the disk-full tests"),
  ...serverTestOpts,
  async fn() {
    await withSmallServer(`[blob_store]\nmin_free_bytes = ${8 * MIB}\n`, async (s, fs) => {
      // A manifest past what KV keeps inline (48 KiB): its body is a file in the blob store.
      const img = await pushImage(s.url, "reserve/app", "v1", {
        extra: { annotations: { pad: "x".repeat(64 * 1024) } },
      });
      const loc = await openSession(s, "reserve/app");
      const chunk = blob(MIB);
      const p1 = await patch(s, loc, chunk, 0);
      await p1.body?.cancel();
      assert.equal(p1.status, 202);

      await fs.fill(6 * MIB);
      // The free-space reading is at most a second old.
      await new Promise((r) => setTimeout(r, 1100));
      const r = await req(s, `/v2/reserve/app/blobs/uploads/?digest=${await sha256(chunk)}`, {
        method: "POST",
        body: chunk as BodyInit,
      });
      await assertUnavailable(r, /under the 8\.0 MiB reserve of \[blob_store\] min_free_bytes/);
      const p2 = await patch(s, loc, chunk, MIB);
      await assertUnavailable(p2, /reserve/);
      assert.equal(await committed(s, loc), `0-${MIB - 1}`);
      const ready = await readyz(s);
      assert.equal(ready.status, 503);
      assert.match(ready.body.error, /is full \(.* free, under the 8\.0 MiB reserve/);
      assert.ok(
        await metric(s, /^wharf_store_refusals_total\{store="blob",cause="reserve"\}/) >= 2,
      );
      const free = await metric(s, /^wharf_store_free_bytes\{store="blob"\}/);
      assert.ok(free > 4 * MIB && free < 8 * MIB, `free bytes ${free}`);
      assert.equal(await metric(s, /^wharf_store_reserve_bytes\{store="blob"\}/), 8 * MIB);

      // A tag moved to a manifest already stored writes no new bytes (the fs store sees its file
      // there): it goes on.
      const move = await req(s, "/v2/reserve/app/manifests/moved", {
        method: "PUT",
        headers: { "content-type": "application/vnd.oci.image.manifest.v1+json" },
        body: img.body as BodyInit,
      });
      await move.body?.cancel();
      assert.equal(move.status, 201);
      // What frees space still works: a manifest delete (KV) and a cancelled session.
      const del = await req(s, `/v2/reserve/app/manifests/${img.digest}`, { method: "DELETE" });
      await del.body?.cancel();
      assert.equal(del.status, 202);
      const cancel = await req(s, loc, { method: "DELETE" });
      await cancel.body?.cancel();
      assert.equal(cancel.status, 204);
      const scrub = await runCli(s, "scrub");
      assert.equal(scrub.code, 0, scrub.stderr);

      await fs.drain();
      await new Promise((r) => setTimeout(r, 1100));
      assert.equal((await readyz(s)).status, 200);
      await pushImage(s.url, "reserve/app", "v2");
    });
  },
});
