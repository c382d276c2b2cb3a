// gzip checkpoints and the zstd side copy against real compressors: random ranges read from
// the nearest checkpoint (or frame) equal the uncompressed bytes, for single- and multi-member
// gzip, and the checkpoint spacing bounds how much a read inflates.
import assert from "node:assert/strict";
import zlib from "node:zlib";
import { CHECKPOINT_SPACING, CheckpointBuilder } from "./gzip_checkpoints.ts";
import { decodeTable, encodeCheckpoints, following, nearest } from "./checkpoint_table.ts";
import { compressedRange, inflateFrom } from "./gzip_read.ts";
import {
  decodeFrames,
  decompressFrame,
  encodeFrames,
  frameAt,
  FrameWriter,
} from "./zstd_frames.ts";
import { readAllStream, slice } from "./layer_store.ts";

/** ~24 MiB mixing text-like and incompressible stretches (both kinds of deflate blocks). */
function sample(size = 24 * 1024 * 1024): Uint8Array {
  const out = new Uint8Array(size);
  let x = 12345;
  const words = new TextEncoder().encode("alpha beta gamma delta layer tar gzip zstd wharf ");
  for (let i = 0; i < size; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out[i] = (i >> 16) % 3 === 0 ? x >>> 24 : words[(x >>> 16) % words.length];
  }
  return out;
}

function chunks(b: Uint8Array, from = 0, size = 65536): ReadableStream<Uint8Array> {
  let at = from;
  return new ReadableStream({
    pull(c) {
      if (at >= b.length) return c.close();
      c.enqueue(b.subarray(at, Math.min(b.length, at + size)));
      at += size;
    },
  });
}

async function gzipCli(data: Uint8Array): Promise<Uint8Array> {
  const p = new Deno.Command("gzip", { args: ["-6", "-c"], stdin: "piped", stdout: "piped" })
    .spawn();
  const w = p.stdin.getWriter();
  const out = new Response(p.stdout).arrayBuffer();
  await w.write(data);
  await w.close();
  await p.status;
  return new Uint8Array(await out);
}

function ranges(size: number, n: number): [number, number][] {
  let x = 7;
  const out: [number, number][] = [[0, 10], [size - 100, 100], [CHECKPOINT_SPACING - 5, 10]];
  for (let i = 0; i < n; i++) {
    x = (x * 69069 + 1) >>> 0;
    const off = x % (size - 1);
    out.push([off, Math.min(size - off, 1 + (x >>> 8) % 300_000)]);
  }
  return out;
}

async function checkGzip(raw: Uint8Array, gz: Uint8Array) {
  const b = new CheckpointBuilder();
  for (let i = 0; i < gz.length; i += 100_003) b.push(gz.subarray(i, i + 100_003));
  const res = b.finish();
  assert.equal(res.complete, true, String(res.error));
  const enc = encodeCheckpoints(res.checkpoints);
  const table = decodeTable(enc);
  assert.ok(table.length >= raw.length / CHECKPOINT_SPACING - 2, `${table.length} checkpoints`);
  for (let i = 1; i < table.length; i++) {
    // A read never inflates much more than the spacing (blocks add a little).
    assert.ok(table[i].uoff - table[i - 1].uoff < CHECKPOINT_SPACING * 2);
  }
  for (const [off, len] of ranges(raw.length, 40)) {
    const cp = nearest(table, off) ??
      { uoff: 0, coff: 0, member: true, bits: 0, windowAt: 0, windowLength: 0 };
    const window = enc.subarray(cp.windowAt, cp.windowAt + cp.windowLength);
    // Both ways a read goes: to the blob's end, and cut at the next checkpoint of the member.
    const next = following(table, off + len - 1, cp);
    const cuts = next !== null && !next.member ? [false, true] : [false];
    for (const cut of cuts) {
      const r = compressedRange(cp, cut ? next : null, gz.length);
      const src = chunks(gz.subarray(0, r.end + 1), r.start);
      const got = await readAllStream(
        slice(inflateFrom(window, cp, src, cut ? next : null), off - cp.uoff, len),
      );
      assert.equal(got.length, len);
      assert.ok(
        got.every((v, i) => v === raw[off + i]),
        `range ${off}+${len} from checkpoint at ${cp.uoff} (cut: ${cut})`,
      );
    }
  }
}

Deno.test("gzip: checkpoints every ~4 MiB give exact random ranges (gzip -6)", async () => {
  const raw = sample();
  await checkGzip(raw, await gzipCli(raw));
});

Deno.test("gzip: a multi-member file (concatenated gzips) reads across members", async () => {
  const raw = sample(12 * 1024 * 1024);
  const a = await gzipCli(raw.subarray(0, 5_000_000));
  const b = await gzipCli(raw.subarray(5_000_000));
  const gz = new Uint8Array(a.length + b.length);
  gz.set(a);
  gz.set(b, a.length);
  await checkGzip(raw, gz);
});

Deno.test("gzip: truncated and corrupt streams are reported, never thrown or hung", () => {
  const raw = sample(2 * 1024 * 1024);
  const gz = zlib.gzipSync(raw);
  const cut = new CheckpointBuilder();
  cut.push(gz.subarray(0, gz.length >> 1));
  assert.equal(cut.finish().complete, false);
  const bad = new CheckpointBuilder();
  const corrupt = gz.slice();
  corrupt.fill(0xff, 1000, 2000);
  bad.push(corrupt);
  const r = bad.finish();
  assert.equal(r.complete, false);
  assert.ok(r.error);
});

Deno.test("zstd: independent frames give exact random ranges", async () => {
  const raw = sample(6 * 1024 * 1024 + 12345);
  const side = new TransformStream<Uint8Array, Uint8Array>();
  const stored = readAllStream(side.readable);
  const w = new FrameWriter(side.writable.getWriter());
  for (let i = 0; i < raw.length; i += 70_001) await w.push(raw.subarray(i, i + 70_001));
  const frames = decodeFrames(encodeFrames(await w.finish()));
  const file = await stored;
  assert.equal(frames.reduce((n, f) => n + f.ulen, 0), raw.length);
  // The side copy is a valid zstd stream as a whole, too.
  assert.deepEqual(new Uint8Array(zlib.zstdDecompressSync(file)), raw);
  for (const [off, len] of ranges(raw.length, 30)) {
    const parts: Uint8Array[] = [];
    let pos = off;
    for (let i = frameAt(frames, off); pos < off + len; i++) {
      const f = frames[i];
      const data = await decompressFrame(file.subarray(f.coff, f.coff + f.clen));
      const to = Math.min(f.ulen, off + len - f.uoff);
      parts.push(data.subarray(pos - f.uoff, to));
      pos = f.uoff + to;
    }
    const got = new Uint8Array(len);
    let o = 0;
    for (const p of parts) {
      got.set(p, o);
      o += p.length;
    }
    assert.ok(got.every((v, i) => v === raw[off + i]), `zstd range ${off}+${len}`);
  }
});
