// Layer index endpoints over HTTP with layers built here: the 202 → 200 sequence and on_push,
// non-tar and oversized blobs ending final, the 404 rules and malformed queries, gzip encoding
// of the listing, get-blob gating, `refreshing` for a listing of an older index version, hostile
// archives (gzip bomb, truncated zstd, too many entries, garbage), and a kill -9 mid-index.
import assert from "node:assert/strict";
import { gunzipSync, gzipSync, zstdCompressSync } from "node:zlib";
import { basename, join } from "node:path";
import { assertErrorCode, req, serverTestOpts } from "../helpers/api.ts";
import { pushBlob, startServer, type TestServer, withServer } from "../helpers/server.ts";
import { sendRaw } from "../helpers/raw_http.ts";
import { openTestKv } from "../helpers/kv.ts";
import { INDEX_VERSION, indexKey, type IndexRecord } from "../../lib/index/mod.ts";
import { jsonBytes, OCI_CONFIG } from "../helpers/oci_content.ts";
import { FakeRegistry } from "../helpers/fake_registry.ts";
import { tarHeader } from "../helpers/tar.ts";
import { paxTarOf } from "../helpers/pax_tar.ts";

const FAST = `
[global.job_queue]
poll_interval_ms = 100
backoff_min_ms = 100
backoff_max_ms = 300
max_attempts = 2
lease_secs = 3
`;
const NO_PUSH_INDEX = `${FAST}
[global.index]
on_push = "none"
`;

// ---- building layers ------------------------------------------------------------------------

/** A tar of `files` (path → bytes) with a directory entry first. */
function makeTar(files: [string, Uint8Array][], end = true): Uint8Array {
  const parts: Uint8Array[] = [tarHeader("data/", 0, "5", 0o755)];
  for (const [p, b] of files) {
    parts.push(tarHeader(p, b.length));
    const padded = new Uint8Array(Math.ceil(b.length / 512) * 512);
    padded.set(b);
    parts.push(padded);
  }
  if (end) parts.push(new Uint8Array(1024));
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

const enc = new TextEncoder();
const SAMPLE: [string, Uint8Array][] = [
  ["data/hello.txt", enc.encode("hello\n")],
  ["data/app.py", enc.encode("print('x')\n")],
  ["data/blob.bin", new Uint8Array(3000).map((_, i) => i % 7)],
];

const LAYER_TYPES = {
  gzip: "application/vnd.oci.image.layer.v1.tar+gzip",
  zstd: "application/vnd.oci.image.layer.v1.tar+zstd",
  none: "application/vnd.oci.image.layer.v1.tar",
};

/** Pushes an image of `layers` to `ns:tag`; returns the layer and config digests. */
async function pushImage(
  s: TestServer,
  ns: string,
  layers: { bytes: Uint8Array; mediaType: string }[],
  tag = "v1",
): Promise<{ layers: string[]; config: string }> {
  const cfg = jsonBytes({ architecture: "amd64", os: "linux", n: crypto.randomUUID() });
  const config = await pushBlob(s.url, ns, cfg);
  const descs = [];
  for (const l of layers) {
    descs.push({
      mediaType: l.mediaType,
      digest: await pushBlob(s.url, ns, l.bytes),
      size: l.bytes.length,
    });
  }
  const r = await req(s, `/v2/${ns}/manifests/${tag}`, {
    method: "PUT",
    headers: { "content-type": "application/vnd.oci.image.manifest.v1+json" },
    body: JSON.stringify({
      schemaVersion: 2,
      mediaType: "application/vnd.oci.image.manifest.v1+json",
      config: { mediaType: OCI_CONFIG, digest: config, size: cfg.length },
      layers: descs,
    }),
  });
  assert.equal(r.status, 201, await r.text());
  return { layers: descs.map((d) => d.digest), config };
}

const url = (ns: string, digest: string, what: string, query = "") =>
  `/v2/${ns}/_svc/layers/${digest}/${what}${query}`;

/** Polls entries until it is not 202; returns the final response. */
async function settle(s: TestServer, ns: string, digest: string, ms = 30_000): Promise<Response> {
  const deadline = Date.now() + ms;
  for (;;) {
    const r = await req(s, url(ns, digest, "entries"));
    if (r.status !== 202) return r;
    await r.body?.cancel();
    if (Date.now() > deadline) assert.fail(`still 202 after ${ms} ms\n${s.output().slice(-2000)}`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

async function failedIndexJobs(s: TestServer): Promise<{ last_error: string }[]> {
  const r = await req(s, "/v2/_svc/jobs/failed?queue=index");
  assert.equal(r.status, 200);
  const body = await r.json();
  return body.failed;
}

// ---- tests ----------------------------------------------------------------------------------

Deno.test({
  ...serverTestOpts,
  name: "layers API: 202 indexing then 200, the same listing for gzip, zstd and plain",
  fn: () =>
    withServer({ config: NO_PUSH_INDEX }, async (s) => {
      const tar = makeTar(SAMPLE);
      const img = await pushImage(s, "a/img", [
        { bytes: new Uint8Array(gzipSync(tar)), mediaType: LAYER_TYPES.gzip },
        { bytes: new Uint8Array(zstdCompressSync(tar)), mediaType: LAYER_TYPES.zstd },
        // compression is told from the bytes, not the media type
        { bytes: new Uint8Array(gzipSync(tar, { level: 1 })), mediaType: LAYER_TYPES.none },
        { bytes: tar, mediaType: LAYER_TYPES.none },
        // two gzip members (as eStargz and concatenating tools write): one tar across both
        {
          bytes: new Uint8Array([
            ...gzipSync(tar.subarray(0, 1700)),
            ...gzipSync(tar.subarray(1700)),
          ]),
          mediaType: LAYER_TYPES.gzip,
        },
      ]);
      const first = await req(s, url("a/img", img.layers[0], "entries"));
      assert.equal(first.status, 202);
      assert.deepEqual(await first.json(), { status: "indexing" });
      const listings = [];
      for (const d of new Set(img.layers)) {
        const r = await settle(s, "a/img", d);
        assert.equal(r.status, 200, await r.clone().text());
        assert.match(r.headers.get("content-type") ?? "", /application\/json/);
        listings.push(await r.json());
      }
      assert.equal(listings.length, 5);
      const [g, z, mislabelled, n, members] = listings;
      for (const l of listings) {
        assert.equal(l.refreshing, false);
        assert.equal(l.uncompressed_size, tar.length);
        assert.deepEqual(l.entries.map((e: { path: string }) => e.path), [
          "data",
          "data/hello.txt",
          "data/app.py",
          "data/blob.bin",
        ]);
      }
      assert.deepEqual(
        listings.map((l) => l.compressed),
        [true, true, true, false, true],
      );
      assert.deepEqual(mislabelled.entries, g.entries);
      assert.deepEqual(members.entries, g.entries);
      assert.deepEqual(z.entries, g.entries);
      assert.deepEqual(n.entries, g.entries);
      const hello = g.entries[1];
      assert.equal(hello.kind, "file");
      assert.equal(hello.content.mime_type, "text/plain");
      assert.equal(g.entries[2].content.mime_type, "text/x-python");
      assert.equal(g.entries[3].content.mime_type, "application/octet-stream");
      assert.equal(g.entries[0].kind, "dir");
      assert.equal(g.entries[0].content, undefined);
      // file reads from each encoding, whole and ranged
      for (const d of img.layers) {
        const f = await req(s, url("a/img", d, "file", "?path=data/blob.bin"));
        assert.equal(f.status, 200);
        assert.deepEqual(new Uint8Array(await f.arrayBuffer()), SAMPLE[2][1]);
        const part = await req(s, url("a/img", d, "file", "?path=data/blob.bin"), {
          headers: { range: "bytes=100-199" },
        });
        assert.equal(part.status, 206);
        assert.deepEqual(new Uint8Array(await part.arrayBuffer()), SAMPLE[2][1].subarray(100, 200));
        const tail = await req(s, url("a/img", d, "file", "?path=data/blob.bin"), {
          headers: { range: "bytes=-10" },
        });
        assert.equal(tail.status, 206);
        assert.deepEqual(new Uint8Array(await tail.arrayBuffer()), SAMPLE[2][1].subarray(2990));
        const bad = await req(s, url("a/img", d, "file", "?path=data/blob.bin"), {
          headers: { range: "bytes=5000-6000" },
        });
        assert.equal(bad.status, 416);
        await bad.body?.cancel();
      }
      // a second namespace owning the same layer shares the index (no new 202)
      await pushImage(s, "b/img", [{ bytes: tar, mediaType: LAYER_TYPES.none }]);
      assert.equal((await req(s, url("b/img", img.layers[3], "entries"))).status, 200);
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "layers API: on_push indexes hosted pushes in the background; non-tar blobs end final",
  fn: () =>
    withServer({ config: FAST }, async (s) => {
      const tar = makeTar(SAMPLE);
      const img = await pushImage(s, "p/img", [
        { bytes: new Uint8Array(gzipSync(tar)), mediaType: LAYER_TYPES.gzip },
      ]);
      // No request needed: the push queued the job; poll the index queue until it is empty.
      const deadline = Date.now() + 15_000;
      for (;;) {
        const r = await req(s, "/v2/_svc/jobs/list?queue=index");
        assert.equal(r.status, 200);
        const j = await r.json();
        if ((j.jobs ?? []).length === 0) break;
        assert.ok(Date.now() < deadline, "index job never ran");
        await new Promise((res) => setTimeout(res, 100));
      }
      const r = await req(s, url("p/img", img.layers[0], "entries"));
      assert.equal(r.status, 200, "indexed on push: no 202");
      await r.body?.cancel();
      // The config blob is owned but no tar: a final 404 after the job, never an endless 202.
      const cfg = await settle(s, "p/img", img.config);
      await assertErrorCode(cfg, 404, "UNSUPPORTED");
      const again = await req(s, url("p/img", img.config, "entries"));
      await assertErrorCode(again, 404, "UNSUPPORTED");
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "layers API: 404 rules, malformed queries, headers, gzip encoding",
  fn: () =>
    withServer({ config: NO_PUSH_INDEX }, async (s) => {
      const tar = makeTar(SAMPLE);
      const img = await pushImage(s, "a/img", [{ bytes: tar, mediaType: LAYER_TYPES.none }]);
      const other = await pushImage(s, "other/img", [
        { bytes: makeTar([["x/y", enc.encode("y")]]), mediaType: LAYER_TYPES.none },
      ]);
      const d = img.layers[0];
      // not yet indexed: file and details are 404, entries 202
      await assertErrorCode(
        await req(s, url("a/img", d, "file", "?path=data/hello.txt")),
        404,
        "NAME_UNKNOWN",
      );
      await assertErrorCode(
        await req(s, url("a/img", d, "details", "?path=data/hello.txt")),
        404,
        "NAME_UNKNOWN",
      );
      assert.equal((await settle(s, "a/img", d)).status, 200);
      // a layer of another namespace, an unknown digest, a malformed digest
      for (
        const u of [
          url("a/img", other.layers[0], "entries"),
          url("a/img", other.layers[0], "file", "?path=x/y"),
          url("a/img", "sha256:" + "0".repeat(64), "entries"),
          url("nosuch/ns", d, "entries"),
        ]
      ) {
        const r = await req(s, u);
        assert.equal(r.status, 404, u);
        assert.ok((await r.json()).errors?.length, u);
      }
      for (const bad of ["sha256:xyz", "nothex", "sha256:" + "g".repeat(64)]) {
        const r = await req(s, url("a/img", bad, "entries"));
        assert.ok(r.status === 404 || r.status === 400, `${bad}: ${r.status}`);
        assert.ok((await r.json()).errors?.length);
      }
      // path rules: missing, empty, repeated, a directory, absent, `..`
      for (
        const q of [
          "",
          "?path=",
          "?path=data/hello.txt&path=data/app.py",
          "?path=data",
          "?path=data/none",
          "?path=../etc/passwd",
          "?path=data/../data/hello.txt",
          "?path=%00",
        ]
      ) {
        for (const what of ["file", "details"]) {
          const r = await req(s, url("a/img", d, what, q));
          assert.equal(r.status, 404, `${what}${q}`);
          assert.ok((await r.json()).errors?.length, `${what}${q}`);
        }
      }
      // a leading ./ or / is the same path
      for (const p of ["./data/hello.txt", "/data/hello.txt"]) {
        const r = await req(s, url("a/img", d, "file", `?path=${encodeURIComponent(p)}`));
        assert.equal(r.status, 200, p);
        assert.equal(await r.text(), "hello\n");
      }
      // headers of a file read
      const f = await req(s, url("a/img", d, "file", "?path=data/app.py&download"));
      assert.equal(f.status, 200);
      assert.equal(f.headers.get("content-security-policy"), "sandbox");
      assert.equal(f.headers.get("x-content-type-options"), "nosniff");
      assert.equal(f.headers.get("content-type"), "text/x-python");
      assert.equal(f.headers.get("content-length"), "11");
      assert.match(f.headers.get("content-disposition") ?? "", /^attachment; filename="app\.py"/);
      await f.body?.cancel();
      const inline = await req(s, url("a/img", d, "file", "?path=data/app.py"));
      assert.equal(inline.headers.get("content-disposition"), null);
      await inline.body?.cancel();
      // details of a text file: {}
      assert.deepEqual(
        await (await req(s, url("a/img", d, "details", "?path=data/hello.txt"))).json(),
        {},
      );
      // The listing is gzipped for a client that accepts it, plain for one that refuses it.
      const target = url("a/img", d, "entries");
      const plain = await sendRaw(s.port, { method: "GET", target, headers: [] });
      assert.equal(plain.status, 200);
      assert.equal(plain.headers.get("content-encoding"), null);
      const zipped = await sendRaw(s.port, {
        method: "GET",
        target,
        headers: [["accept-encoding", "br, gzip;q=0.8"]],
      });
      assert.equal(zipped.status, 200);
      assert.equal(zipped.headers.get("content-encoding"), "gzip");
      // the stored gzipped document goes out as it is, its length known
      assert.equal(zipped.headers.get("content-length"), String(zipped.body.length));
      assert.deepEqual(
        JSON.parse(new TextDecoder().decode(gunzipSync(zipped.body))),
        JSON.parse(new TextDecoder().decode(plain.body)),
      );
      const refused = await sendRaw(s.port, {
        method: "GET",
        target,
        headers: [["accept-encoding", "gzip;q=0, identity"]],
      });
      assert.equal(refused.headers.get("content-encoding"), null);
      assert.deepEqual(refused.body, plain.body);
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "layers API: gated by get-blob on the layer's namespace",
  fn: () =>
    withServer({
      config: `${NO_PUSH_INDEX}
[global.access_policy]
default = "deny"
rules = [
  'request.action != "get-blob" || request.namespace.startsWith("open/")',
]
`,
    }, async (s) => {
      const tar = makeTar(SAMPLE);
      const shut = await pushImage(s, "shut/img", [{ bytes: tar, mediaType: LAYER_TYPES.none }]);
      const open = await pushImage(s, "open/img", [{ bytes: tar, mediaType: LAYER_TYPES.none }]);
      assert.equal((await settle(s, "open/img", open.layers[0])).status, 200);
      for (const what of ["entries", "file?path=data/hello.txt", "details?path=data/hello.txt"]) {
        const r = await req(s, `/v2/shut/img/_svc/layers/${shut.layers[0]}/${what}`);
        assert.ok(r.status === 401 || r.status === 403, `${what}: ${r.status}`);
        const code = (await r.json()).errors?.[0]?.code;
        assert.ok(code === "UNAUTHORIZED" || code === "DENIED", code);
        const ok = await req(s, `/v2/open/img/_svc/layers/${open.layers[0]}/${what}`);
        assert.equal(ok.status, 200, what);
        await ok.body?.cancel();
      }
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "layers API: an older index version is served refreshing while the layer is re-indexed",
  fn: async () => {
    const s1 = await startServer({ config: NO_PUSH_INDEX });
    const dataDir = s1.dataDir;
    let s2: TestServer | null = null;
    try {
      const img = await pushImage(s1, "r/img", [{
        bytes: makeTar(SAMPLE),
        mediaType: LAYER_TYPES.none,
      }]);
      const d = img.layers[0];
      assert.equal((await settle(s1, "r/img", d)).status, 200);
      await s1.stop();
      const t = await openTestKv(join(dataDir, "metadata.kv"));
      const rec = (await t.kv.get<IndexRecord>(indexKey(d))).value!;
      assert.equal(rec.version, INDEX_VERSION);
      await t.kv.set(indexKey(d), { ...rec, version: INDEX_VERSION - 1 });
      await t.close();
      s2 = await startServer({ config: NO_PUSH_INDEX, dataDir });
      const old = await req(s2, url("r/img", d, "entries"));
      assert.equal(old.status, 200);
      const body = await old.json();
      assert.equal(body.refreshing, true);
      assert.equal(body.entries.length, 4, "the old listing is served meanwhile");
      const deadline = Date.now() + 15_000;
      for (;;) {
        const r = await req(s2, url("r/img", d, "entries"));
        const b = await r.json();
        if (b.refreshing === false) {
          assert.equal(b.entries.length, 4);
          break;
        }
        assert.ok(Date.now() < deadline, "never re-indexed");
        await new Promise((res) => setTimeout(res, 100));
      }
    } finally {
      await s1.stop().catch(() => {});
      await s2?.stop();
      await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  ...serverTestOpts,
  name: "layers API: hostile layers end with a final answer (bomb, truncation, entry cap, garbage)",
  fn: () =>
    withServer({
      config: `${FAST}
[global.index]
on_push = "none"
max_uncompressed_size = 8388608
max_entries = 500
max_layer_size = 1100000
`,
    }, async (s) => {
      // gzip bomb: 64 MiB of zeros in one file compress to ~64 KiB
      const bombTar = makeTar([["ok.txt", enc.encode("fine\n")], [
        "zeros",
        new Uint8Array(64 * 1024 * 1024),
      ]]);
      const bomb = new Uint8Array(gzipSync(bombTar, { level: 9 }));
      assert.ok(bomb.length < 1_000_000);
      // a zstd layer cut at 60%
      const bigFiles: [string, Uint8Array][] = [];
      for (let i = 0; i < 40; i++) {
        bigFiles.push([`f${i}`, new Uint8Array(20_000).map((_, k) => (k * (i + 3)) % 251)]);
      }
      const z = new Uint8Array(zstdCompressSync(makeTar(bigFiles)));
      const cut = z.subarray(0, Math.floor(z.length * 0.6));
      // more entries than max_entries
      const many: [string, Uint8Array][] = [];
      for (let i = 0; i < 2000; i++) many.push([`m/${i}`, new Uint8Array(0)]);
      const manyTar = makeTar(many);
      const garbage = crypto.getRandomValues(new Uint8Array(4096));
      const oversize = new Uint8Array(gzipSync(new Uint8Array(1_200_000).map((_, i) => i % 256), {
        level: 0,
      }));
      const img = await pushImage(s, "h/img", [
        { bytes: bomb, mediaType: LAYER_TYPES.gzip },
        { bytes: cut, mediaType: LAYER_TYPES.zstd },
        { bytes: manyTar, mediaType: LAYER_TYPES.none },
        { bytes: garbage, mediaType: LAYER_TYPES.gzip },
        { bytes: oversize, mediaType: LAYER_TYPES.gzip },
      ]);
      const [dBomb, dCut, dMany, dGarbage, dOver] = img.layers;

      const b = await settle(s, "h/img", dBomb);
      assert.equal(b.status, 200, "what was read before the limit is listed");
      const bl = await b.json();
      assert.equal(bl.partial, true);
      assert.match(bl.error, /max_uncompressed_size/);
      assert.deepEqual(bl.entries.map((e: { path: string }) => e.path), ["data", "ok.txt"]);

      const c = await settle(s, "h/img", dCut);
      assert.equal(c.status, 200);
      const cl = await c.json();
      assert.equal(cl.partial, true);
      assert.ok(cl.entries.length > 1 && cl.entries.length < 41, String(cl.entries.length));
      assert.ok(cl.error.length > 0);
      // the partial file of a truncated layer is still served for the whole entries listed
      const f0 = await req(s, url("h/img", dCut, "file", "?path=f0"));
      assert.equal(f0.status, 200);
      assert.deepEqual(new Uint8Array(await f0.arrayBuffer()), bigFiles[0][1]);

      const m = await settle(s, "h/img", dMany);
      assert.equal(m.status, 200);
      const ml = await m.json();
      assert.equal(ml.entries.length, 500);
      assert.equal(ml.partial, true);
      assert.match(ml.error, /more than 500 entries/);

      await assertErrorCode(await settle(s, "h/img", dGarbage), 404, "UNSUPPORTED");
      const o = await settle(s, "h/img", dOver);
      await assertErrorCode(o.clone(), 404, "UNSUPPORTED");
      assert.match(JSON.stringify(await o.json()), /max_layer_size/);

      // partial listings end their jobs with last_error, for the failed list
      const deadline = Date.now() + 10_000;
      let failed: { last_error: string }[] = [];
      while (Date.now() < deadline) {
        failed = await failedIndexJobs(s);
        if (failed.length >= 3) break;
        await new Promise((res) => setTimeout(res, 100));
      }
      const errors = failed.map((j) => j.last_error).join("\n");
      assert.match(errors, /max_uncompressed_size/);
      assert.match(errors, /more than 500 entries/);
      assert.ok(!/\b500\b.*Internal/.test(s.output()));
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "layers API: a kill -9 during indexing resumes after restart",
  fn: async () => {
    const s1 = await startServer({ config: NO_PUSH_INDEX });
    const dataDir = s1.dataDir;
    let s2: TestServer | null = null;
    try {
      // ~96 MiB of little-compressible files: long enough to be killed mid-walk
      const files: [string, Uint8Array][] = [];
      let seed = 1;
      for (let i = 0; i < 24; i++) {
        const b = new Uint8Array(4 * 1024 * 1024);
        const dv = new DataView(b.buffer);
        for (let k = 0; k < b.length; k += 4) {
          seed = (seed * 1103515245 + 12345) >>> 0;
          dv.setUint32(k, seed);
        }
        files.push([`big/${i}`, b]);
      }
      const layer = new Uint8Array(gzipSync(makeTar(files), { level: 1 }));
      const img = await pushImage(s1, "k/img", [{ bytes: layer, mediaType: LAYER_TYPES.gzip }]);
      const d = img.layers[0];
      assert.equal((await req(s1, url("k/img", d, "entries"))).status, 202);
      await new Promise((res) => setTimeout(res, 400));
      await s1.kill();
      s2 = await startServer({ config: NO_PUSH_INDEX, dataDir });
      const r = await settle(s2, "k/img", d, 60_000);
      assert.equal(r.status, 200);
      const l = await r.json();
      assert.equal(l.partial, undefined);
      assert.equal(l.entries.length, 25);
      // the killed run's files were cleared, not left beside the finished index
      const slots = new Set<string>();
      const s3 = Deno.env.get("WHARF_TEST_S3");
      if (s3) {
        // the same store layout as objects (tests/s3/suites_on_s3_test.ts runs this file on S3)
        const { S3Client } = await import("../../lib/storage/s3_client.ts");
        const client = new S3Client({
          endpoint: s3,
          bucket: "wharf",
          region: "us-east-1",
          accessKeyId: "S3RVER",
          secretKey: "S3RVER",
          pathStyle: true,
        });
        const dir = `t/${basename(dataDir)}/derived/index/${d.split(":").join("/")}/`;
        for await (const o of client.list(dir)) slots.add(o.key.slice(dir.length).split("/")[0]);
      } else {
        for await (
          const e of Deno.readDir(join(dataDir, "blobs", "derived", "index", ...d.split(":")))
        ) {
          slots.add(e.name);
        }
      }
      assert.deepEqual([...slots], ["a"]);
      const pick = files[17];
      const f = await req(s2, url("k/img", d, "file", `?path=${pick[0]}`), {
        headers: { range: "bytes=1000000-1000099" },
      });
      assert.equal(f.status, 206);
      assert.deepEqual(
        new Uint8Array(await f.arrayBuffer()),
        pick[1].subarray(1_000_000, 1_000_100),
      );
    } finally {
      await s1.kill().catch(() => {});
      await s2?.stop();
      await Deno.remove(dataDir, { recursive: true }).catch(() => {});
    }
  },
});

Deno.test({
  ...serverTestOpts,
  name: "layers API: on a pull-through namespace an uncached layer is fetched behind the 202",
  fn: async () => {
    const up = await FakeRegistry.start();
    try {
      const layer = new Uint8Array(gzipSync(makeTar(SAMPLE)));
      const layerDigest = up.addBlob("library/app", layer);
      const cfg = jsonBytes({ architecture: "amd64", os: "linux" });
      const cfgDigest = up.addBlob("library/app", cfg);
      up.addManifest(
        "library/app",
        enc.encode(JSON.stringify({
          schemaVersion: 2,
          mediaType: "application/vnd.oci.image.manifest.v1+json",
          config: { mediaType: OCI_CONFIG, digest: cfgDigest, size: cfg.length },
          layers: [{ mediaType: LAYER_TYPES.gzip, digest: layerDigest, size: layer.length }],
        })),
        { tags: ["1.0"] },
      );
      await withServer({
        config: `${FAST}
[repository."hub"]
[[repository."hub".upstream]]
url = "${up.url}"
`,
      }, async (s) => {
        // Neither the manifest nor the layer is cached yet: the layer is fetched, then indexed.
        const first = await req(s, url("hub/library/app", layerDigest, "entries"));
        assert.equal(first.status, 202);
        assert.deepEqual(await first.json(), { status: "indexing" });
        const done = await settle(s, "hub/library/app", layerDigest);
        assert.equal(done.status, 200);
        const l = await done.json();
        assert.deepEqual(l.entries.map((e: { path: string }) => e.path), [
          "data",
          "data/hello.txt",
          "data/app.py",
          "data/blob.bin",
        ]);
        // the fetched layer is now a blob of the cache
        const blob = await req(s, `/v2/hub/library/app/blobs/${layerDigest}`);
        assert.equal(blob.status, 200);
        assert.deepEqual(new Uint8Array(await blob.arrayBuffer()), layer);
        // a digest the upstream does not have either: 404, not an endless 202
        const missing = await req(s, url("hub/library/app", "sha256:" + "1".repeat(64), "entries"));
        assert.equal(missing.status, 404);
        assert.ok((await missing.json()).errors?.length);
      });
    } finally {
      await up.close();
    }
  },
});

Deno.test({
  ...serverTestOpts,
  name: "layers API: any file name downloads with a valid Content-Disposition; `..` paths are 404",
  fn: () =>
    withServer({ config: FAST }, async (s) => {
      const names: (string | Uint8Array)[] = [
        "d/ctl\x01\x07\x1b\x7f.txt", // killed the process: Deno's header writer panicked
        "d/crlf\r\nX-Injected: 1",
        'd/quote"back\\slash%41.txt',
        "d/\tTab and spaces .sh",
        "d/non-ascii-日本語-é.txt", // was 500
        new Uint8Array([0x64, 0x2f, 0xff, 0xfe, 0xc0, 0x41, 0x80]), // invalid UTF-8: was 500
        "d/" + "n".repeat(3000), // a name too long for one filesystem entry
        "../../etc/passwd", // a hostile tar's own entry: never served
        "ok/../x",
      ];
      const tar = paxTarOf(names.map((name, i) => ({ name, data: `file ${i}\n` })));
      const img = await pushImage(s, "names/img", [{ bytes: tar, mediaType: LAYER_TYPES.gzip }]);
      const d = img.layers[0];
      const listing = await (await settle(s, "names/img", d)).json();
      const paths: string[] = listing.entries.map((e: { path: string }) => e.path);
      assert.equal(paths.length, names.length);
      for (let i = 0; i < 7; i++) {
        const u = url("names/img", d, "file", `?path=${encodeURIComponent(paths[i])}&download`);
        for (const method of ["GET", "HEAD"]) {
          const r = await req(s, u, { method });
          assert.equal(r.status, 200, `${method} ${JSON.stringify(paths[i]).slice(0, 60)}`);
          const cd = r.headers.get("content-disposition")!;
          // printable ASCII only; filename an ASCII fallback, filename* the UTF-8 name
          assert.match(cd, /^attachment; filename="[ !#-$&-[\]-~]*"; filename\*=UTF-8''[!-~]*$/);
          const ext = cd.slice(cd.indexOf("''") + 2);
          const base = paths[i].slice(paths[i].lastIndexOf("/") + 1);
          assert.equal(decodeURIComponent(ext), base.slice(0, 255));
          assert.equal(r.headers.get("x-injected"), null);
          if (method === "GET") assert.equal(await r.text(), `file ${i}\n`);
          else await r.body?.cancel();
        }
      }
      assert.equal(paths[5], "d/\ufffd\ufffd\ufffdA\ufffd");
      // `..` in a path is 404, even where the layer holds an entry of that very name.
      assert.ok(paths.includes("../../etc/passwd") && paths.includes("ok/../x"));
      for (
        const p of ["../../etc/passwd", "ok/../x", "d/../d/ctl", "/../etc/passwd", "..", "./."]
      ) {
        for (const what of ["file", "details"]) {
          await assertErrorCode(
            await req(s, url("names/img", d, what, `?path=${encodeURIComponent(p)}`)),
            404,
            "NAME_UNKNOWN",
          );
        }
      }
      // Empty and `.` segments are dropped, as the index drops them from entry names.
      const dotted = await req(s, url("names/img", d, "file", "?path=d//./" + "n".repeat(3000)));
      assert.equal(await dotted.text(), "file 6\n");
      assert.equal((await req(s, "/healthz")).status, 200);
    }),
});
