// Integrity that is checked (issue 38): bytes flipped on disk under a stored blob or manifest are
// never served under its digest. `verify` re-hashes what is stored, reports and quarantines
// what does not match (BLOB_UNKNOWN saying why from then on; a re-push restores it); small
// objects are checked on every read (500 naming the cause); a pull-through copy is fetched again
// from its upstream; the scheduled pass keeps to its rate; a killed pass goes on where it was.
import assert from "node:assert/strict";
import { join } from "node:path";
import { gzipSync, zstdCompressSync } from "node:zlib";
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
import { FakeRegistry } from "../helpers/fake_registry.ts";
import { startReceiver } from "../helpers/webhook_receiver.ts";
import { wharfCommand } from "../helpers/launch.ts";
import { tarHeader } from "../helpers/tar.ts";
import { until } from "../helpers/until.ts";

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
      assert.match(
        run.stdout,
        new RegExp(
          `quarantined: blob ${sd} since \\S+, 100000 bytes hashing to sha256:[0-9a-f]{64}; no source for team/app: push it again`,
        ),
      );
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

Deno.test({
  name:
    "pull-through: a cached layer that rots is quarantined by verify and fetched again from the upstream (blob.corrupt told); a rotten cached config is fetched again by the read itself",
  ...serverTestOpts,
  async fn() {
    const up = await FakeRegistry.start();
    const rx = startReceiver();
    try {
      const config = jsonBytes({ architecture: "amd64", os: "linux", nonce: crypto.randomUUID() });
      const layer = random(100_000);
      const cd = up.addBlob("library/app", config);
      const ld = up.addBlob("library/app", layer);
      const manifest = imageManifest(await descOf(OCI_CONFIG, config), [
        await descOf(OCI_LAYER, layer),
      ]);
      up.addManifest("library/app", manifest, { tags: ["1.0"] });
      const config_ = `${QUIET}
[global.job_queue]
poll_interval_ms = 100
backoff_min_ms = 100
backoff_max_ms = 400

[repository."hub"]
namespace = "docker.io"

[[repository."hub".upstream]]
url = "${up.url}"

[event_webhook.integrity]
url = "${rx.url}"
events = ["blob.corrupt"]
`;
      await withServer({ config: config_ }, async (s) => {
        const ns = "hub/library/app";
        assert.equal((await req(s, `/v2/${ns}/manifests/1.0`)).status, 200);
        for (const [d, bytes] of [[cd, config], [ld, layer]] as const) {
          const r = await getBlob(s, ns, d);
          assert.deepEqual(await bytesOf(r), bytes);
        }
        // The fills have stored the blobs once their files are in place.
        await until("the cached layer", () => exists(blobFile(s, ld)));
        await until("the cached config", () => exists(blobFile(s, cd)));
        assert.equal(up.count("GET", new RegExp(`/blobs/${ld}`)), 1);

        await rot(s, ld);
        const v = await runCli(s, "verify", ["--rate", "0"]);
        assert.equal(v.code, 3, v.stdout + v.stderr);
        assert.match(
          v.stdout,
          new RegExp(
            `corrupt ${ld} .*: quarantined \\(bytes kept aside\\); fetched again from the upstream of ${ns}`,
          ),
        );
        assert.match(
          v.stdout,
          /1 quarantined \(1 fetched again from an upstream, 0 to push again\)/,
        );
        // The cache job verify queued fetches it again, before any client asks.
        await until(
          "the refetch",
          () => Promise.resolve(up.count("GET", new RegExp(`/blobs/${ld}`)) === 2),
        );
        await until("the refetched layer", () => exists(blobFile(s, ld)));
        const r = await getBlob(s, ns, ld);
        assert.equal(r.status, 200);
        assert.deepEqual(await bytesOf(r), layer);
        await rx.waitFor(
          (d) => d.some((x) => x.event.kind === "blob.corrupt"),
          20_000,
          "blob.corrupt",
        );
        const ev = rx.ofKind("blob.corrupt")[0].event;
        assert.equal(ev.namespace, ns);
        assert.equal(ev.digest, ld);
        assert.equal((ev.actor as { username: string }).username, "wharf-verify");
        assert.deepEqual(
          { ...(ev.corruption as Record<string, unknown>), found: "…" },
          { object: "blob", found: "…", size: 100_000, refetch: true },
        );

        // A small cached blob is checked on each read: the read quarantines it and answers with
        // the upstream's bytes.
        await rot(s, cd, 1);
        const c = await getBlob(s, ns, cd);
        assert.equal(c.status, 200);
        assert.deepEqual(await bytesOf(c), config);
        assert.equal(up.count("GET", new RegExp(`/blobs/${cd}`)), 2);
      });
    } finally {
      await rx.stop();
      await up.close();
    }
  },
});

Deno.test({
  name:
    "[global.integrity] interval_secs: the server's pass starts at startup, keeps to bytes_per_sec and quarantines what rotted",
  ...serverTestOpts,
  async fn() {
    const dataDir = await Deno.makeTempDir({ prefix: "wharf-verify-schedule-" });
    try {
      const blobs = Array.from({ length: 4 }, () => random(250_000));
      const digests: string[] = [];
      await withServer({ dataDir, config: QUIET }, async (s) => {
        for (const b of blobs) digests.push(await pushBlob(s.url, "team/sched", b));
        await rot(s, digests[2]);
      });
      // 1 MB at 250 kB/s: about 4 s.
      const config = `${QUIET}
[global.integrity]
interval_secs = 3600
bytes_per_sec = 250000
`;
      await withServer({ dataDir, config }, async (s) => {
        await until(
          "the scheduled pass",
          () => Promise.resolve(/verify: 4 blob\(s\) checked/.test(s.output())),
        );
        const line =
          /verify: 4 blob\(s\) checked \(1000000 bytes\), 1 corrupt: 1 quarantined.*pass complete; ([\d.]+)s \(([\d.]+) MB\/s\)/
            .exec(s.output());
        assert.ok(line, s.output().slice(-3000));
        const [secs, rate] = [Number(line[1]), Number(line[2])];
        assert.ok(secs >= 2.5, `a 1 MB pass at 250 kB/s took ${secs} s`);
        assert.ok(rate <= 0.3, `${rate} MB/s`);
        assert.match(s.output(), new RegExp(`verify: corrupt ${digests[2]} `));
        await assertErrorCode(await getBlob(s, "team/sched", digests[2]), 404, "BLOB_UNKNOWN");
        const m = await (await req(s, "/metrics")).text();
        assert.match(m, /^wharf_verify_runs_total\{result="complete"\} 1$/m);
        // Every byte once, and the rotten blob's again under the claim before it moved.
        assert.match(m, /^wharf_verify_bytes_total 1250000$/m);
      });
    } finally {
      await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  name:
    "a verify stopped (SIGTERM) or killed (SIGKILL) mid-pass goes on where it stopped when run again",
  ...serverTestOpts,
  fn: () =>
    withServer({ config: QUIET }, async (s) => {
      const digests: string[] = [];
      for (let i = 0; i < 10; i++) {
        digests.push(await pushBlob(s.url, "team/resume", random(100_000)));
      }
      // 1 MB at 200 kB/s takes ~5 s; each run below is cut well before its end.
      const start = () =>
        wharfCommand(["verify", "--rate", "200000", "-c", s.configPath], {
          env: { NO_COLOR: "1", WHARF_STRICT_KV_LIMITS: "1" },
          stdout: "piped",
          stderr: "piped",
        }).spawn();
      // Each run is cut once its saved cursor shows progress (a fixed sleep raced a slow start
      // on a busy machine).
      const kv = await Deno.openKv(join(s.dataDir, "metadata.kv"));
      const checked = async () =>
        (await kv.get<{ phase: string; counts: Record<string, number> }>(["verifycur", ""]))
          .value;
      const cutOnce = async (
        what: string,
        past: number,
        child: Deno.ChildProcess,
        sig: Deno.Signal,
      ) => {
        try {
          await until(what, async () => {
            const c = await checked();
            return !!c && c.phase === "blobs" && (c.counts.blobs ?? 0) > past;
          });
        } finally {
          child.kill(sig);
        }
      };

      // Ctrl+C or SIGTERM: stops between two reads, saves the cursor, frees the lease, says so.
      const first = start();
      await cutOnce("the first run's cursor", 0, first, "SIGTERM");
      const out1 = await first.output();
      const text1 = new TextDecoder().decode(out1.stdout);
      assert.equal(out1.code, 130, text1 + new TextDecoder().decode(out1.stderr));
      const n1 = Number(
        /verify: (\d+) blob\(s\) checked .*stopped: the next run goes on from here/.exec(text1)
          ?.[1],
      );
      assert.ok(n1 > 0 && n1 < 10, text1);

      // kill -9: the cursor saved within the last second is where the next run goes on; the
      // dead run's lease runs out within seconds and the next run waits for it. Killed once its
      // saved cursor is past the first run's.
      const second = start();
      await cutOnce("the second run's cursor past the first's", n1, second, "SIGKILL");
      kv.close();
      await second.output();
      const again = await runCli(s, "verify", ["--rate", "0"]);
      assert.equal(again.code, 0, again.stdout + again.stderr);
      const m =
        /verify: 10 blob\(s\) checked \(1000000 bytes\).*pass complete \(resumed: blobs after (sha256:[0-9a-f]{64})\); [\d.]+s/
          .exec(again.stdout);
      assert.ok(m, again.stdout);
      const left = digests.filter((d) => d > m[1]).length;
      assert.ok(left < 10 - n1, `resumed with ${left} of 10 left after a first run of ${n1}`);
      // The pass is done: the next run starts a fresh one over all ten.
      const fresh = await runCli(s, "verify", ["--rate", "0"]);
      assert.equal(fresh.code, 0, fresh.stdout + fresh.stderr);
      assert.match(fresh.stdout, /verify: 10 blob\(s\) checked \(1000000 bytes\).*pass complete; /);
      assert.doesNotMatch(fresh.stdout, /resumed/);
    }),
});

Deno.test({
  name:
    "a layer index table that no longer matches its checksum is never used: a file read answers 500 naming it",
  ...serverTestOpts,
  fn: () =>
    withServer({
      config: `${QUIET}
[global.job_queue]
poll_interval_ms = 100
`,
    }, async (s) => {
      const text = new TextEncoder().encode("hello, checked world\n");
      const padded = new Uint8Array(512);
      padded.set(text);
      const tar = new Uint8Array([
        ...tarHeader("hello.txt", text.length),
        ...padded,
        ...new Uint8Array(1024),
      ]);
      const layers = [
        { bytes: new Uint8Array(gzipSync(tar)), table: "checkpoints.bin", type: OCI_LAYER },
        {
          bytes: new Uint8Array(zstdCompressSync(tar)),
          table: "frames.bin",
          type: "application/vnd.oci.image.layer.v1.tar+zstd",
        },
      ];
      const config = jsonBytes({ architecture: "amd64", os: "linux", n: crypto.randomUUID() });
      await pushBlob(s.url, "team/idx", config);
      const descs = [];
      for (const l of layers) {
        await pushBlob(s.url, "team/idx", l.bytes);
        descs.push({ ...(await descOf(l.type, l.bytes)) });
      }
      await putManifestOk(
        s,
        "team/idx",
        "v1",
        imageManifest(await descOf(OCI_CONFIG, config), descs),
      );
      for (const [i, l] of layers.entries()) {
        const d = descs[i].digest;
        const base = `/v2/team/idx/_svc/layers/${d}`;
        await until(`the index of the ${l.table} layer`, async () => {
          const r = await req(s, `${base}/entries`);
          await r.body?.cancel();
          return r.status === 200;
        });
        const [alg, hex] = d.split(":");
        const dir = join(s.dataDir, "blobs", "derived", "index", alg, hex);
        let file = "";
        for (const slot of ["a", "b"]) {
          if (await exists(join(dir, slot, l.table))) file = join(dir, slot, l.table);
        }
        assert.ok(file, `no ${l.table} under ${dir}`);
        const bytes = await Deno.readFile(file);
        bytes[bytes.length - 1] ^= 1;
        await Deno.writeFile(file, bytes);
        const e = await assertErrorCode(
          await req(s, `${base}/file?path=hello.txt`),
          500,
          "INTERNAL_ERROR",
        );
        assert.match(
          String(e.detail),
          new RegExp(
            `${l.table} is damaged \\(its checksum does not match\\): "wharf reindex --force" rebuilds it`,
          ),
        );
      }
      const m = await (await req(s, "/metrics")).text();
      assert.match(m, /^wharf_integrity_failures_total\{object="index-table"\} 2$/m);
    }),
});
