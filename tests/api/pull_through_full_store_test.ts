// A pull-through cache whose blob store takes no new bytes (below `[blob_store] min_free_bytes`,
// here set above any disk's free space) still serves its fleet: a miss is passed through from
// the upstream uncached, checked against its digest as it passes. A wrong blob never ends cleanly
// (its last chunk is held back until the bytes hashed), and nothing is stored or queued.
import assert from "node:assert/strict";
import { FakeRegistry, randomBytes } from "../helpers/fake_registry.ts";
import { startServer, type TestServer, withServer } from "../helpers/server.ts";
import { ignoreWithoutSmallFs, mountSmallFs } from "../helpers/small_fs.ts";
import { until } from "../helpers/until.ts";
import { bytesOf, req, serverTestOpts } from "../helpers/api.ts";
import { imageManifest, jsonBytes, OCI_CONFIG, OCI_LAYER } from "../helpers/oci_content.ts";

const FULL = `[blob_store]\nmin_free_bytes = ${2 ** 52}\n`;
const config = (upUrl: string) =>
  `${FULL}[repository."hub"]\n[[repository."hub".upstream]]\nurl = "${upUrl}"\n`;

Deno.test(
  "pull-through with a full blob store: misses pass through uncached and verified",
  serverTestOpts,
  async () => {
    const up = await FakeRegistry.start();
    try {
      const cfg = jsonBytes({ os: "linux", n: crypto.randomUUID() });
      const layer = randomBytes(300_000);
      const cfgDigest = up.addBlob("library/app", cfg);
      const layerDigest = up.addBlob("library/app", layer);
      up.addManifest(
        "library/app",
        imageManifest({ mediaType: OCI_CONFIG, digest: cfgDigest, size: cfg.length }, [
          { mediaType: OCI_LAYER, digest: layerDigest, size: layer.length },
        ]),
        { tags: ["v1"] },
      );
      // bytes the upstream serves under a digest they do not hash to
      const wrong = randomBytes(300_000);
      const lie = up.addBlob(
        "library/app",
        wrong,
        layerDigest.replace(/.$/, (c) => c === "0" ? "1" : "0"),
      );
      await withServer({ config: config(up.url) }, async (s) => {
        const m = await req(s, "/v2/hub/library/app/manifests/v1");
        assert.equal(m.status, 200, "a manifest is metadata: still cached");
        await m.body?.cancel();
        for (let i = 1; i <= 2; i++) {
          const r = await req(s, `/v2/hub/library/app/blobs/${layerDigest}`);
          assert.equal(r.status, 200, `pull ${i}`);
          assert.equal(r.headers.get("content-length"), String(layer.length));
          assert.deepEqual(await bytesOf(r), layer, `pull ${i}: the upstream's bytes`);
          assert.equal(up.count("GET", `/v2/library/app/blobs/${layerDigest}`), i, "not cached");
        }
        const c = await req(s, `/v2/hub/library/app/blobs/${cfgDigest}`);
        assert.deepEqual(await bytesOf(c), cfg);

        const bad = await req(s, `/v2/hub/library/app/blobs/${lie}`);
        let got = -1;
        try {
          got = (await bad.arrayBuffer()).byteLength;
        } catch { /* the body broke off: what a client must see */ }
        assert.ok(got < wrong.length, `a wrong blob never ends whole (${got} bytes read)`);

        // A range goes upstream as is and queues the blob's cache job (SPEC's rule 8): the job
        // downloads nothing for a store that would refuse the bytes, it retries later.
        const ranged = randomBytes(100_000);
        const rangedDigest = up.addBlob("library/app", ranged);
        const part = await req(s, `/v2/hub/library/app/blobs/${rangedDigest}`, {
          headers: { Range: "bytes=0-9" },
        });
        assert.equal(part.status, 206);
        assert.deepEqual(await bytesOf(part), ranged.subarray(0, 10));
        await until("the cache job's first attempt", async () => {
          const list = await (await req(s, "/v2/_svc/jobs/list?queue=cache&n=10")).json();
          return list.jobs.some((j: { attempts: number }) => j.attempts >= 1);
        });
        assert.equal(up.count("GET", `/v2/library/app/blobs/${rangedDigest}`), 1, "the range only");
        // A job's storage key moves each time it is claimed, renewed or rescheduled, so a DELETE
        // can name a key that just moved (404, as a CI run met): list and delete until it is gone.
        await until("the ranged blob's cache job deleted", async () => {
          const pending = await (await req(s, "/v2/_svc/jobs/list?queue=cache&n=10")).json();
          if (pending.jobs.length === 0) return true;
          const del = await req(
            s,
            `/v2/_svc/jobs/pending?queue=cache&key=${pending.jobs[0].storage_key}`,
            { method: "DELETE" },
          );
          await del.body?.cancel();
          assert.ok(del.status === 204 || del.status === 404, `delete: ${del.status}`);
          return false;
        });

        const metrics = await (await req(s, "/metrics")).text();
        assert.match(metrics, /wharf_pull_through_total\{kind="blob",result="uncached"\} [3-9]/);
        // Nothing was queued to fill later, and nothing is stored: a HEAD still asks upstream.
        const jobs = await (await req(s, "/v2/_svc/jobs/list?queue=cache&n=100")).json();
        assert.deepEqual(jobs.jobs, []);
        const h = await req(s, `/v2/hub/library/app/blobs/${layerDigest}`, { method: "HEAD" });
        await h.body?.cancel();
        assert.equal(h.status, 200);
        assert.equal(up.count("HEAD", `/v2/library/app/blobs/${layerDigest}`), 1);
      });
    } finally {
      await up.close();
    }
  },
);

Deno.test({
  name: "pull-through: the disk fills during a fill: its client still gets every byte, " +
    "verified and uncached; once space returns the blob is cached",
  ignore: ignoreWithoutSmallFs("the disk-full pull-through test"),
  ...serverTestOpts,
  async fn() {
    const MIB = 1024 * 1024;
    const fs = await mountSmallFs(24 * MIB);
    const up = await FakeRegistry.start();
    let s: TestServer | null = null;
    try {
      const layer = randomBytes(12 * MIB);
      const digest = up.addBlob("library/big", layer);
      // An upstream slower than the client, as over a WAN link: the client follows the fill's
      // front, which the store's refusal does not take away.
      up.fault({ path: `/blobs/${digest}`, times: 1 }, { trickleMs: 15, chunkBytes: 256 * 1024 });
      // No reserve: the fill starts, then its writes meet ENOSPC.
      s = await startServer({
        dataDir: fs.dir,
        config: `[blob_store]\nmin_free_bytes = 0\n[repository."hub"]\n` +
          `[[repository."hub".upstream]]\nurl = "${up.url}"\n`,
      });
      await fs.fill(4 * MIB);
      const r = await req(s, `/v2/hub/library/big/blobs/${digest}`);
      assert.equal(r.status, 200);
      assert.deepEqual(await bytesOf(r), layer, "every byte, though the store took only some");
      assert.match(s.output(), /pull-through fill goes on uncached: the blob store refused/);
      // The fill's cache job (queued if the KV, on the same full disk, took it) does not download
      // the blob again while the store refuses it: it retries later.
      await new Promise((r) => setTimeout(r, 2000));
      assert.equal(up.count("GET", `/v2/library/big/blobs/${digest}`), 1);

      await fs.drain();
      // Space is back: once the store's fault is no longer held (FAULT_HOLD_MS after it was
      // last met) a pull fills the cache, and the one after is served from it.
      let cached = false;
      const end = Date.now() + 45_000;
      while (Date.now() < end && !cached) {
        const again = await req(s, `/v2/hub/library/big/blobs/${digest}`);
        assert.equal(again.status, 200);
        assert.deepEqual(await bytesOf(again), layer);
        const before = up.count("GET", `/v2/library/big/blobs/${digest}`);
        const third = await req(s, `/v2/hub/library/big/blobs/${digest}`);
        assert.deepEqual(await bytesOf(third), layer);
        cached = up.count("GET", `/v2/library/big/blobs/${digest}`) === before;
        if (!cached) await new Promise((res) => setTimeout(res, 1000));
      }
      assert.ok(cached, "cached once the disk has room");
    } finally {
      await s?.stop();
      await up.close();
      await fs.close();
    }
  },
});
