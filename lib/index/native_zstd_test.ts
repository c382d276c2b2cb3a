// libzstd through FFI against node:zlib's zstd: the exact stream for one and several frames at
// any chunking, truncated and corrupt input reported (never thrown), and the same listing as
// node:zlib through the whole index pass, cut layers included.
import assert from "node:assert/strict";
import zlib from "node:zlib";
import { join } from "node:path";
import { nativeZstdAvailable, NativeZstdDecoder } from "./native_zstd.ts";
import { indexLayer } from "./indexer.ts";
import { IndexRecords } from "./index_records.ts";
import { files } from "./layer_store.ts";
import { FsBlobStore } from "../storage/mod.ts";
import { buildConfig } from "../config/mod.ts";

function sample(size: number, seed = 1): Uint8Array {
  const out = new Uint8Array(size);
  let x = seed;
  for (let i = 0; i < size; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out[i] = (i >> 15) % 3 === 0 ? x >>> 24 : 97 + ((x >>> 16) % 7);
  }
  return out;
}

const concat = (...parts: Uint8Array[]) => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
};

function decode(z: Uint8Array, step: number) {
  const d = NativeZstdDecoder.create()!;
  const out: Uint8Array[] = [];
  for (let i = 0; i < z.length; i += step) {
    d.feed(z.slice(i, i + step));
    for (let o = d.next(); o !== null; o = d.next()) out.push(o);
  }
  out.push(d.flush().slice());
  return { ...d.finish(), output: concat(...out) };
}

const has = nativeZstdAvailable();

Deno.test({
  name: "native zstd: exact output for one and several frames, any chunking",
  ignore: !has,
  fn: () => {
    const raw = sample(9 * 1024 * 1024 + 77);
    const one = new Uint8Array(zlib.zstdCompressSync(raw));
    const several = concat(
      new Uint8Array(zlib.zstdCompressSync(raw.subarray(0, 1_000_000))),
      new Uint8Array(zlib.zstdCompressSync(raw.subarray(1_000_000, 1_000_010))),
      new Uint8Array(zlib.zstdCompressSync(raw.subarray(1_000_010))),
    );
    for (const z of [one, several]) {
      for (const step of [100, 65_536, 3_000_001]) {
        const r = decode(z, step);
        assert.equal(r.complete, true, String(r.error));
        assert.equal(r.output.length, raw.length);
        assert.ok(r.output.every((v, i) => v === raw[i]));
      }
    }
  },
});

Deno.test({
  name: "native zstd: truncated and corrupt input are reported, never thrown",
  ignore: !has,
  fn: () => {
    const raw = sample(2 * 1024 * 1024, 5);
    const z = new Uint8Array(zlib.zstdCompressSync(raw));
    const cut = decode(z.subarray(0, z.length >> 1), 4096);
    assert.equal(cut.complete, false);
    assert.match(String(cut.error), /truncated/);
    assert.ok(cut.output.every((v, i) => v === raw[i]));
    const bad = new Uint8Array(z);
    bad.fill(0xff, 100, 400); // (no checksum: may read as a block cut short)
    const r = decode(bad, 65_536);
    assert.equal(r.complete, false);
    assert.ok(r.error);
    assert.equal(decode(new Uint8Array(0), 1).complete, false);
  },
});

Deno.test({
  name: "index pass: libzstd in the worker lists what node:zlib lists (whole and cut)",
  ignore: !has,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "wharf-native-zstd-" });
    const kv = await Deno.openKv(join(dir, "kv"));
    try {
      const store = new FsBlobStore(join(dir, "store"));
      await store.init();
      const src = join(dir, "src");
      for (let i = 0; i < 30; i++) {
        await Deno.mkdir(join(src, `d${i % 4}`), { recursive: true });
        await Deno.writeFile(join(src, `d${i % 4}`, `f${i}`), sample(400_000 + i * 999, i + 2));
      }
      const out = await new Deno.Command("tar", {
        args: ["-C", src, "--sort=name", "--format=pax", "-cf", "-", "."],
        stdout: "piped",
      }).output();
      const tar = out.stdout;
      const z = new Uint8Array(zlib.zstdCompressSync(tar));
      const cut = z.subarray(0, Math.floor(z.length * 0.6));
      const cfg = buildConfig({}, []);
      const run = async (bytes: Uint8Array, inflater: "native" | "node") => {
        const digest = `sha256:${crypto.randomUUID().replaceAll("-", "").padEnd(64, "0")}`;
        await store.put(digest, bytes);
        const { record } = await indexLayer({
          cfg,
          records: new IndexRecords(kv),
          store,
          digest,
          size: bytes.length,
          inflater,
        });
        const listing = new TextDecoder().decode(
          await new Response(await store.readDerived(files.listing(record.base))).arrayBuffer(),
        );
        return { record, listing: listing.trim().split("\n") };
      };
      const n = await run(z, "native");
      const o = await run(z, "node");
      assert.equal(n.record.state, "ready");
      assert.equal(n.record.compression, "zstd");
      assert.equal(n.record.uncompressedSize, tar.length);
      assert.deepEqual(n.listing, o.listing);
      const nc = await run(cut, "native");
      const oc = await run(cut, "node");
      assert.equal(nc.record.state, "partial");
      assert.equal(oc.record.state, "partial");
      const [short, long] = [nc.listing, oc.listing].sort((a, b) => a.length - b.length);
      assert.ok(short.length > 5, String(short.length));
      assert.deepEqual(short, long.slice(0, short.length));
    } finally {
      kv.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "index pass: a layer with data after the end-of-archive blocks completes (gzip and zstd)",
  ignore: !has,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "wharf-native-eoa-" });
    const kv = await Deno.openKv(join(dir, "kv"));
    try {
      const store = new FsBlobStore(join(dir, "store"));
      await store.init();
      const src = join(dir, "src");
      await Deno.mkdir(src);
      await Deno.writeFile(join(src, "a.bin"), sample(300_000, 9));
      const out = await new Deno.Command("tar", {
        args: ["-C", src, "--format=pax", "-cf", "-", "a.bin"],
        stdout: "piped",
      }).output();
      // 8 MiB of noise after the archive: far more than the worker may hand out untaken
      const layer = concat(out.stdout, sample(8 * 1024 * 1024, 11));
      const cfg = buildConfig({}, []);
      for (const bytes of [zlib.gzipSync(layer), zlib.zstdCompressSync(layer)]) {
        const b = new Uint8Array(bytes);
        const digest = `sha256:${crypto.randomUUID().replaceAll("-", "").padEnd(64, "0")}`;
        await store.put(digest, b);
        const { record } = await indexLayer({
          cfg,
          records: new IndexRecords(kv),
          store,
          digest,
          size: b.length,
        });
        assert.equal(record.state, "ready");
        assert.equal(record.entries, 1);
      }
    } finally {
      kv.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
