// The native (FFI zlib) gzip pass against pako's and node:zlib's: identical checkpoints and
// windows, the exact uncompressed stream when it inflates for the walk (single and multi-member,
// any chunking), truncated and corrupt streams reported, and the same listing through the whole
// index pass as with node:zlib.
import assert from "node:assert/strict";
import zlib from "node:zlib";
import { join } from "node:path";
import { CheckpointBuilder } from "./gzip_checkpoints.ts";
import { NativeCheckpointBuilder, nativeZlibAvailable } from "./native_checkpoints.ts";
import { indexLayer } from "./indexer.ts";
import { IndexRecords } from "./index_records.ts";
import { files } from "./layer_store.ts";
import { FsBlobStore } from "../storage/mod.ts";
import { buildConfig } from "../config/mod.ts";

function sample(size: number, seed = 1): Uint8Array {
  const out = new Uint8Array(size);
  let x = seed;
  const words = new TextEncoder().encode("alpha beta gamma delta layer tar gzip zstd wharf ");
  for (let i = 0; i < size; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out[i] = (i >> 16) % 3 === 0 ? x >>> 24 : words[(x >>> 16) % words.length];
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

function pakoPass(gz: Uint8Array, step: number) {
  const windows: Uint8Array[] = [];
  const b = new CheckpointBuilder(undefined, (c) => windows.push(c.window.slice()));
  for (let i = 0; i < gz.length; i += step) b.push(gz.subarray(i, i + step));
  return { ...b.finish(), lengths: b.lengths, windows };
}

function nativePass(gz: Uint8Array, step: number, emit: boolean) {
  const windows: Uint8Array[] = [];
  const b = NativeCheckpointBuilder.create(undefined, (c) => windows.push(c.window.slice()), emit)!;
  const out: Uint8Array[] = [];
  for (let i = 0; i < gz.length; i += step) {
    b.feed(gz.slice(i, i + step));
    for (let o = b.next(); o !== null; o = b.next()) out.push(o);
  }
  out.push(b.flush().slice());
  return { ...b.finish(), lengths: b.lengths, windows, output: concat(...out) };
}

const hasNative = nativeZlibAvailable();

Deno.test({
  name: "native gzip pass: the same checkpoints and windows as pako, and the exact output",
  ignore: !hasNative,
  fn: () => {
    const raw = sample(14 * 1024 * 1024);
    const single = zlib.gzipSync(raw, { level: 6 });
    const multi = concat(
      zlib.gzipSync(raw.subarray(0, 5_000_001), { level: 1 }),
      zlib.gzipSync(raw.subarray(5_000_001, 5_000_100), { level: 9 }),
      zlib.gzipSync(raw.subarray(5_000_100), { level: 6 }),
    );
    for (const gz of [single, multi]) {
      for (const step of [1_000, 65_536, 1_000_003]) {
        const p = pakoPass(gz, step);
        for (const emit of [false, true]) {
          const n = nativePass(gz, step, emit);
          assert.equal(n.complete, true, String(n.error));
          assert.deepEqual(n.checkpoints, p.checkpoints);
          assert.deepEqual(n.lengths, p.lengths);
          assert.deepEqual(n.windows, p.windows);
          if (emit) {
            assert.ok(n.output.length === raw.length && n.output.every((v, i) => v === raw[i]));
          }
        }
      }
    }
  },
});

Deno.test({
  name: "native gzip pass: truncated, corrupt and trailing garbage are reported, never thrown",
  ignore: !hasNative,
  fn: () => {
    const raw = sample(3 * 1024 * 1024, 7);
    const gz = zlib.gzipSync(raw);
    const cut = nativePass(gz.subarray(0, gz.length >> 1), 4096, true);
    assert.equal(cut.complete, false);
    assert.match(String(cut.error), /truncated/);
    // what came before the cut is exact
    assert.ok(cut.output.length > 0 && cut.output.every((v, i) => v === raw[i]));
    const corrupt = new Uint8Array(gz);
    corrupt.fill(0xff, 1000, 2000);
    const bad = nativePass(corrupt, 65_536, true);
    assert.equal(bad.complete, false);
    assert.match(String(bad.error), /^gzip: /);
    const trailing = nativePass(concat(gz, new Uint8Array([1, 2, 3])), 65_536, false);
    assert.equal(trailing.complete, false);
    assert.match(String(trailing.error), /trailing garbage/);
  },
});

async function tarOf(dir: string, entries: [string, Uint8Array][]): Promise<Uint8Array> {
  const src = join(dir, "src");
  for (const [p, b] of entries) {
    await Deno.mkdir(join(src, p, ".."), { recursive: true });
    await Deno.writeFile(join(src, p), b);
  }
  const out = await new Deno.Command("tar", {
    args: ["-C", src, "--sort=name", "--format=pax", "-cf", "-", "."],
    stdout: "piped",
  }).output();
  assert.ok(out.success);
  return out.stdout;
}

Deno.test({
  name: "index pass: the native inflate lists what node:zlib lists (whole, multi-member, cut)",
  ignore: !hasNative,
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "wharf-native-index-" });
    const kv = await Deno.openKv(join(dir, "kv"));
    try {
      const store = new FsBlobStore(join(dir, "store"));
      await store.init();
      const entries: [string, Uint8Array][] = [];
      for (let i = 0; i < 24; i++) {
        entries.push([`d${i % 3}/f${i}.bin`, sample(700_000 + i * 1000, i + 3)]);
        entries.push([`d${i % 3}/t${i}.txt`, new TextEncoder().encode(`line ${i}\n`.repeat(i))]);
      }
      const tar = await tarOf(dir, entries);
      const whole = zlib.gzipSync(tar);
      const multi = concat(
        zlib.gzipSync(tar.subarray(0, 7_777_777)),
        zlib.gzipSync(tar.subarray(7_777_777)),
      );
      const cut = whole.subarray(0, Math.floor(whole.length * 0.6));
      const cfg = buildConfig({}, []);
      const run = async (gz: Uint8Array, inflater: "native" | "node") => {
        const digest = `sha256:${crypto.randomUUID().replaceAll("-", "").padEnd(64, "0")}`;
        await store.put(digest, gz);
        const { record } = await indexLayer({
          cfg,
          records: new IndexRecords(kv),
          store,
          digest,
          size: gz.length,
          inflater,
        });
        const listing = new TextDecoder().decode(
          await new Response(await store.readDerived(files.listing(record.base))).arrayBuffer(),
        );
        return { record, listing };
      };
      for (const gz of [whole, multi]) {
        const n = await run(gz, "native");
        const z = await run(gz, "node");
        assert.equal(n.record.state, "ready");
        assert.equal(n.record.entries, z.record.entries);
        assert.equal(n.record.uncompressedSize, tar.length);
        assert.equal(n.listing, z.listing);
      }
      const n = await run(cut, "native");
      const z = await run(cut, "node");
      assert.equal(n.record.state, "partial");
      assert.equal(z.record.state, "partial");
      assert.ok(n.record.entries > 10, String(n.record.entries));
      assert.ok(n.record.error);
      // node:zlib holds back some output it decoded before the cut; what both list is identical
      const lines = (s: string) => s.trim().split("\n");
      const [short, long] = [lines(n.listing), lines(z.listing)].sort((a, b) =>
        a.length - b.length
      );
      assert.ok(short.length > 10);
      assert.deepEqual(short, long.slice(0, short.length));
    } finally {
      kv.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
