// Integrity that is checked (issue 38): bytes flipped on disk under a stored blob or manifest are
// never served under its digest. `verify` re-hashes what is stored, reports and quarantines
// what does not match (BLOB_UNKNOWN saying why from then on; a re-push restores it); small
// objects are checked on every read (500 naming the cause); a pull-through copy is fetched again
// from its upstream; the scheduled pass keeps to its rate; a killed pass goes on where it was.
import assert from "node:assert/strict";
import { join } from "node:path";
import { pushBlob, runCli, sha256Hex, type TestServer, withServer } from "../helpers/server.ts";
import { assertErrorCode, bytesOf, req, serverTestOpts } from "../helpers/api.ts";
import {
  descOf,
  imageManifest,
  jsonBytes,
  OCI_CONFIG,
  OCI_LAYER,
  putManifestOk,
} from "../helpers/oci_content.ts";

/** No indexing or scanning of the test's random layers: only the bytes matter here. */
const QUIET = `
[global.index]
on_push = "none"
`;

function random(n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let i = 0; i < n; i += 65536) crypto.getRandomValues(out.subarray(i, i + 65536));
  return out;
}

/** The file of `digest` under a test server's fs blob store. */
function blobFile(s: TestServer, digest: string): string {
  const [alg, hex] = digest.split(":");
  return join(s.dataDir, "blobs", "blobs", alg, hex.slice(0, 2), hex);
}

/** Flips `n` bytes in the middle of the stored file of `digest` (bit rot, as the issue saw it). */
async function rot(s: TestServer, digest: string, n = 4): Promise<void> {
  const path = blobFile(s, digest);
  const bytes = await Deno.readFile(path);
  const at = bytes.length >> 1;
  for (let i = 0; i < n; i++) bytes[at + i] ^= 0x5a;
  await Deno.writeFile(path, bytes);
}

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

async function getBlob(s: TestServer, ns: string, digest: string): Promise<Response> {
  return await req(s, `/v2/${ns}/blobs/${digest}`);
}

/** Pushes an image of a config and the given layers; returns the manifest's digest. */
async function pushImage(s: TestServer, ns: string, tag: string, layers: Uint8Array[]) {
  const config = jsonBytes({ architecture: "amd64", os: "linux", nonce: crypto.randomUUID() });
  await pushBlob(s.url, ns, config);
  for (const l of layers) await pushBlob(s.url, ns, l);
  const body = imageManifest(
    await descOf(OCI_CONFIG, config),
    await Promise.all(layers.map((l) => descOf(OCI_LAYER, l))),
  );
  await putManifestOk(s, ns, tag, body);
  return { digest: `sha256:${await sha256Hex(body)}`, body, config };
}

Deno.test({
  name:
    "verify: flipped bytes in a stored 100 KB and a 1 MiB blob are reported and quarantined; GET answers BLOB_UNKNOWN saying why; a re-push restores them",
  ...serverTestOpts,
  fn: () =>
    withServer({ config: QUIET }, async (s) => {
      const small = random(100_000);
      const large = random(1 << 20);
      const sd = `sha256:${await sha256Hex(small)}`;
      const ld = `sha256:${await sha256Hex(large)}`;
      await pushImage(s, "team/app", "v1", [small, large]);
      await rot(s, sd);
      await rot(s, ld);

      // A dry run reports both and changes nothing.
      const dry = await runCli(s, "verify", ["--dry-run", "--rate", "0"]);
      assert.equal(dry.code, 3, dry.stdout + dry.stderr);
      assert.match(
        dry.stdout,
        new RegExp(
          `corrupt ${sd} \\(100000 bytes hash to sha256:[0-9a-f]{64}\\): would quarantine`,
        ),
      );
      assert.match(dry.stdout, new RegExp(`corrupt ${ld} \\(1048576 bytes hash to sha256:`));
      assert.match(
        dry.stdout,
        /verify \(dry run\): \d+ blob\(s\) checked .*2 corrupt \(would be quarantined\)/,
      );
      assert.ok(await exists(blobFile(s, ld)), "a dry run moves nothing");
      // Large blobs stream unchecked until verify quarantines them (the client's digest check
      // is the net meanwhile): the rotten bytes are what a GET streams now.
      const before = await getBlob(s, "team/app", ld);
      assert.equal(before.status, 200);
      assert.notEqual(`sha256:${await sha256Hex(await bytesOf(before))}`, ld);

      const run = await runCli(s, "verify", ["--rate", "0"]);
      assert.equal(run.code, 3, run.stdout + run.stderr);
      for (const d of [sd, ld]) {
        assert.match(
          run.stdout,
          new RegExp(
            `corrupt ${d} \\(\\d+ bytes hash to sha256:[0-9a-f]{64}\\): quarantined \\(bytes kept aside\\); no source for team/app: push it again`,
          ),
        );
      }
      assert.match(
        run.stdout,
        /2 corrupt: 2 quarantined \(0 fetched again from an upstream, 2 to push again\)/,
      );
      assert.match(run.stdout, new RegExp(`quarantined: ${sd} was quarantined at `));
      assert.ok(!(await exists(blobFile(s, sd))), "moved out of the blob store");
      assert.ok(await exists(join(s.dataDir, "blobs", "quarantine", "sha256", sd.slice(7))));

      for (const d of [sd, ld]) {
        const e = await assertErrorCode(await getBlob(s, "team/app", d), 404, "BLOB_UNKNOWN");
        assert.match(
          String(e.detail),
          new RegExp(
            `${d} was quarantined at .*: its stored bytes hash to sha256:[0-9a-f]{64}, not to its digest \\(push it again to restore it\\)`,
          ),
        );
        const head = await req(s, `/v2/team/app/blobs/${d}`, { method: "HEAD" });
        await head.body?.cancel();
        assert.equal(head.status, 404, "HEAD says so too, so a client pushes it again");
      }
      // The metric counts what verify took out of serving.
      const metrics = await (await req(s, "/metrics")).text();
      assert.match(metrics, /^wharf_quarantined_objects 2$/m);

      // A client pushing the image again restores the blobs; the next pass finds all well and
      // drops the records.
      await pushBlob(s.url, "team/app", small);
      await pushBlob(s.url, "team/app", large);
      for (const [d, bytes] of [[sd, small], [ld, large]] as const) {
        const r = await getBlob(s, "team/app", d);
        assert.equal(r.status, 200);
        assert.deepEqual(await bytesOf(r), bytes);
      }
      const again = await runCli(s, "verify", ["--rate", "0"]);
      assert.equal(again.code, 0, again.stdout + again.stderr);
      assert.match(
        again.stdout,
        /0 corrupt: 0 quarantined .* 2 restored; 0 quarantined now; pass complete/,
      );
    }),
});

Deno.test({
  name:
    "small objects are checked on every read: a flipped config answers 500 naming the cause, then BLOB_UNKNOWN; a flipped manifest body answers 500, never its bytes",
  ...serverTestOpts,
  fn: () =>
    withServer({ config: QUIET }, async (s) => {
      const layer = random(100_000);
      // Over 48 KiB: the manifest body lives in the blob store, as a file on disk.
      const pad = "x".repeat(60_000);
      const config = jsonBytes({ architecture: "amd64", os: "linux", nonce: crypto.randomUUID() });
      const cd = await pushBlob(s.url, "team/small", config);
      const ld = await pushBlob(s.url, "team/small", layer);
      const body = imageManifest(
        await descOf(OCI_CONFIG, config),
        [await descOf(OCI_LAYER, layer)],
        {
          annotations: { pad },
        },
      );
      await putManifestOk(s, "team/small", "v1", body);
      const md = `sha256:${await sha256Hex(body)}`;

      await rot(s, ld, 4);
      const first = await assertErrorCode(
        await getBlob(s, "team/small", ld),
        500,
        "INTERNAL_ERROR",
      );
      assert.match(
        String(first.detail),
        new RegExp(
          `the stored bytes of blob ${ld} do not match its digest \\(they hash to sha256:[0-9a-f]{64}\\): not served`,
        ),
      );
      // The read quarantined it: from now on the namespace no longer has it, and says why.
      const next = await assertErrorCode(await getBlob(s, "team/small", ld), 404, "BLOB_UNKNOWN");
      assert.match(String(next.detail), /was quarantined at .*push it again to restore it/);
      // The config, untouched, still reads.
      const c = await getBlob(s, "team/small", cd);
      assert.deepEqual(await bytesOf(c), config);

      await rot(s, md, 1);
      for (const path of [`/v2/team/small/manifests/v1`, `/v2/team/small/manifests/${md}`]) {
        const r = await req(s, path);
        const text = await r.text();
        assert.equal(r.status, 500, text);
        assert.ok(!text.includes(pad), "never the stored bytes");
        const e = JSON.parse(text).errors[0];
        assert.equal(e.code, "INTERNAL_ERROR");
        assert.match(e.detail, new RegExp(`${md}.*(do not match its digest|was quarantined at)`));
      }
      // Through the blob endpoint too.
      const asBlob = await req(s, `/v2/team/small/blobs/${md}`);
      assert.equal(asBlob.status, 500, await asBlob.text());
      const metrics = await (await req(s, "/metrics")).text();
      assert.match(metrics, /^wharf_integrity_failures_total\{object="blob"\} 1$/m);
      assert.match(metrics, /^wharf_integrity_failures_total\{object="manifest"\} [1-9]/m);
      assert.match(metrics, /^wharf_quarantined_total\{object="manifest"\} 1$/m);

      // A push of the same manifest restores it.
      await putManifestOk(s, "team/small", "v1", body);
      const ok = await req(s, `/v2/team/small/manifests/v1`);
      assert.equal(ok.status, 200);
      assert.deepEqual(await bytesOf(ok), body);
    }),
});

Deno.test({
  name: "a manifest body kept in KV that no longer hashes to its digest is refused, not served",
  ...serverTestOpts,
  async fn() {
    const dataDir = await Deno.makeTempDir({ prefix: "wharf-verify-kv-" });
    try {
      const body = imageManifest(
        await descOf(OCI_CONFIG, jsonBytes({ n: crypto.randomUUID() })),
        [],
      );
      const md = `sha256:${await sha256Hex(body)}`;
      await withServer({ dataDir, config: QUIET }, async (s) => {
        await putManifestOk(s, "team/kv", "v1", body);
      });
      // Bit rot in the KV file, as the stored record would carry it.
      const kv = await Deno.openKv(join(dataDir, "metadata.kv"));
      const key = ["rev", "team/kv", md];
      const rec = (await kv.get<{ body: Uint8Array }>(key)).value!;
      assert.ok(rec.body, "a small manifest's body is kept in KV");
      rec.body[10] ^= 0x20;
      await kv.set(key, rec);
      kv.close();
      await withServer({ dataDir, config: QUIET }, async (s) => {
        for (let i = 0; i < 2; i++) {
          const r = await req(s, `/v2/team/kv/manifests/v1`);
          const e = await assertErrorCode(r, 500, "INTERNAL_ERROR");
          assert.match(String(e.detail), new RegExp(`manifest ${md} do not match its digest`));
        }
        const v = await runCli(s, "verify", ["--rate", "0"]);
        assert.equal(v.code, 3, v.stdout + v.stderr);
        assert.match(v.stdout, new RegExp(`corrupt manifest team/kv@${md} kept in KV`));
        assert.match(v.stdout, /1 manifest body\(ies\) in KV checked, 1 corrupt/);
        // A push rewrites it; the next pass drops the record.
        await putManifestOk(s, "team/kv", "v1", body);
        assert.deepEqual(await bytesOf(await req(s, `/v2/team/kv/manifests/v1`)), body);
        const after = await runCli(s, "verify", ["--rate", "0"]);
        assert.equal(after.code, 0, after.stdout + after.stderr);
        assert.match(after.stdout, /1 restored; 0 quarantined now/);
      });
    } finally {
      await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    }
  },
});
