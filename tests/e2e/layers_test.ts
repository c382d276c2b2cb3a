// The layer index against the realistic image from make-images.sh, pushed three ways: by skopeo
// (gzip), by skopeo recompressing to zstd, and uncompressed (pushed here over HTTP, skopeo
// always compresses for a registry). The three listings agree entry for entry, every regular
// file read back through the `file` endpoint is byte-identical to the extracted tar, random
// ranges are right, and the ELF and certificate details match readelf and the bundle.
import assert from "node:assert/strict";
import { gunzipSync } from "node:zlib";
import { join } from "node:path";
import { req } from "../helpers/api.ts";
import { pushBlob, type TestServer, withServer } from "../helpers/server.ts";
import { buildImages, type Images, missingTools, readBlob, skopeoOk } from "./_skopeo.ts";

const skipReason = missingTools();
const images: Images | null = skipReason ? null : await buildImages();
globalThis.addEventListener("unload", () => images?.cleanup());
const base = { ignore: skipReason !== null, sanitizeOps: false, sanitizeResources: false };

const CONFIG = `
[global.job_queue]
poll_interval_ms = 100

[global.index]
on_push = "none"
`;

function img(): Images {
  assert.ok(images, "test images were not built");
  return images;
}

interface Entry {
  path: string;
  kind: string;
  size: number;
  mode: number;
  uid: number;
  gid: number;
  mtime: number;
  offset: number;
  link_target?: string;
  capabilities?: string[];
  content?: { sha256: string; sha512: string; mime_type: string; secrets?: unknown[] };
}

interface Listing {
  refreshing: boolean;
  compressed: boolean;
  uncompressed_size: number;
  entries: Entry[];
}

const layerUrl = (ns: string, digest: string, what: string) =>
  `/v2/${ns}/_svc/layers/${digest}/${what}`;

/** GET entries until 200; the first answer for a never-indexed layer is 202 indexing. */
async function listing(s: TestServer, ns: string, digest: string): Promise<Listing> {
  const deadline = Date.now() + 60_000;
  let first = true;
  for (;;) {
    const r = await req(s, layerUrl(ns, digest, "entries"));
    if (r.status === 200) return await r.json();
    assert.equal(r.status, 202, `${ns} ${digest}: ${r.status} ${await r.clone().text()}`);
    const body = await r.json();
    assert.deepEqual(body, { status: "indexing" });
    if (first) first = false;
    if (Date.now() > deadline) assert.fail(`${digest} still indexing\n${s.output().slice(-2000)}`);
    await new Promise((res) => setTimeout(res, 150));
  }
}

async function manifestLayers(s: TestServer, ns: string, ref: string) {
  const r = await req(s, `/v2/${ns}/manifests/${ref}`, {
    headers: { accept: "application/vnd.oci.image.manifest.v1+json" },
  });
  assert.equal(r.status, 200);
  const m = await r.json();
  return m.layers as { digest: string; mediaType: string; size: number }[];
}

/** Pushes v1 with every layer uncompressed (media type `…tar`). */
async function pushPlain(s: TestServer, ns: string): Promise<void> {
  const i = img();
  const mBytes = await readBlob(i.layout, i.v1.digest);
  const m = JSON.parse(new TextDecoder().decode(mBytes));
  await pushBlob(s.url, ns, await readBlob(i.layout, m.config.digest));
  for (const l of m.layers) {
    const plain = new Uint8Array(gunzipSync(await readBlob(i.layout, l.digest)));
    l.digest = await pushBlob(s.url, ns, plain);
    l.size = plain.length;
    l.mediaType = "application/vnd.oci.image.layer.v1.tar";
  }
  const r = await req(s, `/v2/${ns}/manifests/v1`, {
    method: "PUT",
    headers: { "content-type": m.mediaType },
    body: JSON.stringify(m),
  });
  assert.equal(r.status, 201, await r.text());
}

async function extract(tar: Uint8Array, dir: string): Promise<void> {
  await Deno.mkdir(dir, { recursive: true });
  const f = `${dir}.tar`;
  await Deno.writeFile(f, tar);
  const out = await new Deno.Command("tar", {
    args: ["-xf", f, "-C", dir, "--no-same-owner", "--no-same-permissions"],
    stderr: "piped",
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  await Deno.remove(f);
}

Deno.test({
  ...base,
  name: "layers: gzip, zstd and plain copies list the same entries and serve identical files",
  fn: () =>
    withServer({ config: CONFIG }, async (s) => {
      const i = img();
      // zstd first: pushed after the gzip copy, skopeo would mount the gzip blobs instead.
      await skopeoOk([
        "copy",
        "--dest-tls-verify=false",
        "--dest-compress-format",
        "zstd",
        `oci:${i.layout}:v1`,
        `docker://127.0.0.1:${s.port}/zs/img:v1`,
      ], s);
      await skopeoOk([
        "copy",
        "--dest-tls-verify=false",
        `oci:${i.layout}:v1`,
        `docker://127.0.0.1:${s.port}/gz/img:v1`,
      ], s);
      await pushPlain(s, "plain/img");
      const gz = await manifestLayers(s, "gz/img", "v1");
      const zs = await manifestLayers(s, "zs/img", "v1");
      const pl = await manifestLayers(s, "plain/img", "v1");
      assert.equal(gz.length, 3);
      assert.ok(zs.every((l) => l.mediaType.endsWith("+zstd")), JSON.stringify(zs));
      assert.ok(pl.every((l) => l.mediaType.endsWith(".tar")));

      const work = await Deno.makeTempDir({ prefix: "wharf-layers-" });
      try {
        for (let n = 0; n < 3; n++) {
          const [a, b, c] = await Promise.all([
            listing(s, "gz/img", gz[n].digest),
            listing(s, "zs/img", zs[n].digest),
            listing(s, "plain/img", pl[n].digest),
          ]);
          assert.deepEqual([a.compressed, b.compressed, c.compressed], [true, true, false]);
          assert.equal(a.refreshing, false);
          assert.deepEqual(b.entries, a.entries, `layer ${n}: zstd listing differs from gzip`);
          assert.deepEqual(c.entries, a.entries, `layer ${n}: plain listing differs from gzip`);
          const tar = new Uint8Array(gunzipSync(await readBlob(i.layout, i.v1.layers[n])));
          assert.equal(a.uncompressed_size, tar.length);
          const dir = join(work, `l${n}`);
          await extract(tar, dir);
          const files = a.entries.filter((e) => e.kind === "file");
          assert.ok(files.length > 0);
          for (const e of a.entries) {
            assert.ok(!e.path.startsWith("./") && !e.path.endsWith("/"), e.path);
            if (e.kind !== "file") continue;
            // The offset points at the file's bytes in the uncompressed stream.
            const want = await Deno.readFile(join(dir, e.path));
            assert.deepEqual(tar.subarray(e.offset, e.offset + e.size), want, e.path);
            for (const [ns, ls] of [["gz/img", gz], ["zs/img", zs], ["plain/img", pl]] as const) {
              const r = await req(
                s,
                `${layerUrl(ns, ls[n].digest, "file")}?path=${encodeURIComponent(e.path)}`,
              );
              assert.equal(r.status, 200, `${ns} ${e.path}`);
              assert.equal(r.headers.get("content-type"), e.content!.mime_type);
              assert.equal(r.headers.get("content-security-policy"), "sandbox");
              assert.equal(r.headers.get("x-content-type-options"), "nosniff");
              const got = new Uint8Array(await r.arrayBuffer());
              assert.equal(got.length, want.length, `${ns} ${e.path}`);
              assert.ok(got.every((v, k) => v === want[k]), `${ns} ${e.path} bytes differ`);
            }
          }
          // Random ranges of the largest files, on all three encodings.
          const big = [...files].sort((x, y) => y.size - x.size).slice(0, 4);
          for (const e of big) {
            const want = await Deno.readFile(join(dir, e.path));
            for (let k = 0; k < 5; k++) {
              const start = Math.floor(Math.random() * e.size);
              const end = Math.min(e.size - 1, start + Math.floor(Math.random() * 200_000));
              for (const [ns, ls] of [["gz/img", gz], ["zs/img", zs], ["plain/img", pl]] as const) {
                const r = await req(
                  s,
                  `${layerUrl(ns, ls[n].digest, "file")}?path=${encodeURIComponent(e.path)}`,
                  { headers: { range: `bytes=${start}-${end}` } },
                );
                assert.equal(r.status, 206);
                assert.equal(r.headers.get("content-range"), `bytes ${start}-${end}/${e.size}`);
                const got = new Uint8Array(await r.arrayBuffer());
                assert.deepEqual(got, want.subarray(start, end + 1), `${ns} ${e.path} ${start}`);
              }
            }
          }
        }
      } finally {
        await Deno.remove(work, { recursive: true }).catch(() => {});
      }
    }),
});

async function readelf(path: string): Promise<string> {
  const out = await new Deno.Command("readelf", { args: ["-h", "-l", "-d", "-n", "-W", path] })
    .output();
  assert.ok(out.success);
  return new TextDecoder().decode(out.stdout);
}

Deno.test({
  ...base,
  name: "layers: entry kinds, modes, capabilities, mime types, ELF and certificate details",
  fn: () =>
    withServer({ config: CONFIG }, async (s) => {
      const i = img();
      await skopeoOk([
        "copy",
        "--dest-tls-verify=false",
        `oci:${i.layout}:v1`,
        `docker://127.0.0.1:${s.port}/app/img:v1`,
      ], s);
      const [l1, l2, l3] = i.v1.layers;
      const one = await listing(s, "app/img", l1);
      const two = await listing(s, "app/img", l2);
      const three = await listing(s, "app/img", l3);
      const at = (l: Listing, p: string) => {
        const e = l.entries.find((x) => x.path === p);
        assert.ok(e, `no ${p}`);
        return e;
      };
      // Kinds
      assert.equal(at(one, "usr/bin").kind, "dir");
      assert.deepEqual([at(one, "bin").kind, at(one, "bin").link_target], ["symlink", "usr/bin"]);
      assert.equal(at(one, "usr/bin/sh").link_target, "dash");
      const hard = at(one, "usr/share/doc/rc/README.hardlink");
      assert.deepEqual([hard.kind, hard.link_target], ["hardlink", "usr/share/doc/rc/README"]);
      assert.equal(hard.content, undefined, "a hard link carries no content");
      assert.equal(at(two, "etc/foo").kind, "whiteout");
      assert.ok(three.entries.some((e) => e.kind === "opaque" && e.path === "opt/app"));
      assert.ok(at(one, "usr/share/doc/rc/dir with space/file name.txt").content);
      // Modes and owners as make-images.sh set them
      assert.equal(at(one, "usr/local/bin/suid-true").mode, 0o4755);
      assert.equal(at(one, "tmp").mode, 0o1777);
      assert.equal(at(one, "root").mode, 0o700);
      assert.deepEqual([at(one, "home/app").uid, at(one, "home/app").gid], [1000, 1000]);
      assert.ok(one.entries.every((e) => Number.isInteger(e.mtime) && e.mtime > 0));
      if (i.refs.CAPABILITY && i.refs.CAPABILITY !== "none") {
        const cap = i.refs.CAPABILITY.split("=")[0];
        assert.deepEqual(at(two, "usr/local/bin/captrue").capabilities, [cap]);
      }
      assert.equal(at(one, "usr/bin/ls").capabilities, undefined);
      // mime types by SPEC rules 1–5
      assert.equal(at(one, "usr/bin/ls").content!.mime_type, "application/x-executable");
      assert.equal(
        at(one, "etc/ssl/certs/ca-certificates.crt").content!.mime_type,
        "application/x-pem-file",
      );
      assert.equal(at(three, "opt/app/config.json").content!.mime_type, "application/json");
      assert.equal(at(one, "etc/passwd").content!.mime_type, "text/plain");
      assert.match(at(two, "usr/local/bin/hello.sh").content!.mime_type, /sh/);
      const empty = at(one, "usr/share/doc/rc/empty-file");
      assert.equal(
        empty.content!.sha256,
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
      );

      // Hard link serves its target; download adds Content-Disposition
      const q = (p: string) => `?path=${encodeURIComponent(p)}`;
      const viaLink = await req(s, layerUrl("app/img", l1, "file") + q(hard.path) + "&download");
      assert.equal(viaLink.status, 200);
      assert.match(viaLink.headers.get("content-disposition") ?? "", /^attachment;.*README/);
      assert.equal(
        await viaLink.text(),
        await (await req(s, layerUrl("app/img", l1, "file") + q("usr/share/doc/rc/README")))
          .text(),
      );

      // ELF details against readelf on the same binary from the layer
      const lsBytes = new Uint8Array(
        await (await req(s, layerUrl("app/img", l1, "file") + q("usr/bin/ls"))).arrayBuffer(),
      );
      const tmp = await Deno.makeTempFile();
      await Deno.writeFile(tmp, lsBytes);
      const re = await readelf(tmp);
      await Deno.remove(tmp);
      const d = await (await req(s, layerUrl("app/img", l1, "details") + q("usr/bin/ls"))).json();
      assert.ok(d.elf, JSON.stringify(d));
      assert.equal(d.elf.bits, re.includes("Class:                             ELF64") ? 64 : 32);
      assert.equal(
        d.elf.entry,
        "0x" + /Entry point address:\s+0x([0-9a-f]+)/.exec(re)![1].replace(/^0+(?=.)/, ""),
      );
      const interp = /Requesting program interpreter: ([^\]]+)\]/.exec(re)?.[1] ?? "";
      assert.equal(d.elf.interpreter, interp);
      const needed = [...re.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) =>
        m[1]
      );
      assert.deepEqual(d.elf.needed, needed);
      const buildId = /Build ID: ([0-9a-f]+)/.exec(re)?.[1] ?? "";
      assert.equal(d.elf.build_id, buildId);
      assert.equal(d.elf.dynamic, true);
      assert.equal(d.elf.endian, "little");

      // Certificates: every block of the CA bundle, parsed
      const bundle = new TextDecoder().decode(
        await (await req(
          s,
          layerUrl("app/img", l1, "file") +
            q("etc/ssl/certs/ca-certificates.crt"),
        )).arrayBuffer(),
      );
      const count = bundle.split("-----BEGIN CERTIFICATE-----").length - 1;
      const c = await (await req(
        s,
        layerUrl("app/img", l1, "details") + q("etc/ssl/certs/ca-certificates.crt"),
      )).json();
      assert.equal(c.certificates.length, count);
      assert.ok(count > 100);
      for (const cert of c.certificates) {
        assert.equal(cert.label, "CERTIFICATE");
        assert.ok(cert.certificate.subject && cert.certificate.issuer);
        assert.match(cert.certificate.not_before, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      }
      // Anything else: {}
      assert.deepEqual(
        await (await req(s, layerUrl("app/img", l1, "details") + q("etc/passwd"))).json(),
        {},
      );
    }),
});
