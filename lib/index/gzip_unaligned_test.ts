// Checkpoints at block boundaries that are not byte-aligned (issue 22, "Slow reads"): `gzip -9`
// of zeros has no aligned boundary at all, so a read of the last file inflated the whole layer.
// Both index passes (pako and native zlib) must place one about every 4 MiB of output, and every
// read from one — through DecompressionStream (a range cut at the next checkpoint) or pako (to
// the blob's end) — must give back the original bytes.
import assert from "node:assert/strict";
import zlib from "node:zlib";
import { join } from "node:path";
import { type Checkpoint, CHECKPOINT_SPACING, CheckpointBuilder } from "./gzip_checkpoints.ts";
import {
  type CheckpointRef,
  decodeTable,
  encodeCheckpoints,
  encodeTable,
  following,
  nearest,
} from "./checkpoint_table.ts";
import { resumePrefix } from "./deflate_prefix.ts";
import { compressedRange, inflateFrom } from "./gzip_read.ts";
import { NativeCheckpointBuilder, nativeZlibAvailable } from "./native_checkpoints.ts";
import { indexLayer } from "./indexer.ts";
import { IndexRecords } from "./index_records.ts";
import { files, LayerReader, readAllStream } from "./layer_store.ts";
import { FsBlobStore } from "../storage/mod.ts";
import { buildConfig } from "../config/mod.ts";
import { fc, fuzzParams } from "../../tests/helpers/fuzz.ts";
import { concat } from "../../tests/helpers/bytes.ts";

const hasNative = nativeZlibAvailable();

async function run(cmd: string, args: string[], input: Uint8Array): Promise<Uint8Array> {
  const p = new Deno.Command(cmd, { args, stdin: "piped", stdout: "piped" }).spawn();
  const out = new Response(p.stdout).arrayBuffer();
  const w = p.stdin.getWriter();
  await w.write(input);
  await w.close();
  assert.ok((await p.status).success, `${cmd} ${args.join(" ")}`);
  return new Uint8Array(await out);
}

/** A ustar archive of `files` (names under 100 bytes), built here so the test needs no tar. */
function tar(files: [string, Uint8Array][]): Uint8Array {
  const parts: Uint8Array[] = [];
  const enc = new TextEncoder();
  for (const [name, data] of files) {
    const h = new Uint8Array(512);
    const field = (at: number, s: string) => h.set(enc.encode(s), at);
    field(0, name);
    field(100, "0000644\0");
    field(108, "0000000\0");
    field(116, "0000000\0");
    field(124, data.length.toString(8).padStart(11, "0") + "\0");
    field(136, "00000000000\0");
    field(148, "        ");
    h[156] = 0x30;
    field(257, "ustar\0");
    field(263, "00");
    const sum = h.reduce((n, b) => n + b, 0);
    field(148, sum.toString(8).padStart(6, "0") + "\0 ");
    parts.push(h, data, new Uint8Array((512 - data.length % 512) % 512));
  }
  parts.push(new Uint8Array(1024));
  return concat(...parts);
}

interface Pass {
  checkpoints: Checkpoint[];
  /** the encoded file (table, then windows), as encodeCheckpoints writes it */
  file: Uint8Array;
}

function pass(gz: Uint8Array, native: boolean, spacing = CHECKPOINT_SPACING, step = 65_536): Pass {
  const b = native ? NativeCheckpointBuilder.create(spacing)! : new CheckpointBuilder(spacing);
  for (let i = 0; i < gz.length; i += step) b.push(gz.slice(i, i + step));
  const r = b.finish();
  assert.equal(r.error, null);
  assert.ok(r.complete);
  return { checkpoints: r.checkpoints, file: encodeCheckpoints(r.checkpoints) };
}

/**
 * Bytes [start, end] as LayerReader reads them, and how many bytes the inflate produced to get
 * there (everything from the checkpoint on, the window excluded).
 */
async function read(
  gz: Uint8Array,
  file: Uint8Array,
  start: number,
  end: number,
  piece = 7919,
): Promise<{ bytes: Uint8Array; inflated: number }> {
  const table = decodeTable(file);
  const cp: CheckpointRef = nearest(table, start) ??
    { uoff: 0, coff: 0, member: true, bits: 0, windowAt: 0, windowLength: 0 };
  const window = file.subarray(cp.windowAt, cp.windowAt + cp.windowLength);
  const next = following(table, end, cp);
  const r = compressedRange(cp, next, gz.length);
  const chunks: Uint8Array[] = [];
  for (let at = r.start; at <= r.end; at += piece) {
    chunks.push(gz.slice(at, Math.min(r.end + 1, at + piece)));
  }
  const all = await readAllStream(
    inflateFrom(window, cp, ReadableStream.from(chunks), r.cut ? next : null),
  );
  return {
    bytes: all.subarray(start - cp.uoff, start - cp.uoff + end - start + 1),
    inflated: all.length,
  };
}

const equal = (a: Uint8Array, b: Uint8Array) =>
  a.length === b.length && a.every((v, i) => v === b[i]);

// GNU gzip ends a block every 32k symbols (zlib every 16k): with 258-byte matches of zeros,
// ~8.5 MB of output.
const BLOCK = 32768 * 258;

Deno.test("gzip -9 of zeros: a checkpoint every ~4 MiB, and the last file reads from the last", async () => {
  const tail = new TextEncoder().encode("the file after the zeros\n");
  const layer = tar([["zeros.bin", new Uint8Array(64 * 1024 * 1024)], ["last.txt", tail]]);
  const gz = await run("gzip", ["-9", "-c", "-n"], layer);
  const at = 64 * 1024 * 1024 + 1024;
  assert.ok(equal(layer.subarray(at, at + tail.length), tail));
  const passes = [pass(gz, false)];
  if (hasNative) passes.push(pass(gz, true));
  for (const p of passes) {
    const cps = p.checkpoints;
    assert.ok(cps.length >= 64 * 1024 * 1024 / (CHECKPOINT_SPACING + BLOCK), `${cps.length}`);
    for (let i = 1; i < cps.length; i++) {
      const gap = cps[i].uoff - cps[i - 1].uoff;
      assert.ok(gap >= CHECKPOINT_SPACING && gap <= CHECKPOINT_SPACING + BLOCK, `gap ${gap}`);
    }
    assert.ok(cps.some((c) => c.bits !== 0), "unaligned boundaries are taken");
    const { bytes, inflated } = await read(gz, p.file, at, at + tail.length - 1);
    assert.ok(equal(bytes, tail));
    // from the last checkpoint: at most one interval, not the 64 MiB before it
    assert.ok(inflated <= CHECKPOINT_SPACING + BLOCK + 2048, `inflated ${inflated}`);
  }
  if (passes.length === 2) assert.deepEqual(passes[1].checkpoints, passes[0].checkpoints);
});

/** Counts the bytes of the blob's ranges a reader asks for (derived files are not counted). */
class ReadsCountedStore extends FsBlobStore {
  compressedRead = 0;
  override read(digest: string, range?: { start: number; end: number }, size?: number) {
    if (range) this.compressedRead += range.end - range.start + 1;
    return super.read(digest, range, size);
  }
}

Deno.test("the index pass and LayerReader: a read at the end of 64 MiB of gzip -9 zeros starts at the last checkpoint", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wharf-unaligned-" });
  const kv = await Deno.openKv(join(dir, "kv"));
  try {
    const store = new ReadsCountedStore(join(dir, "store"));
    await store.init();
    const tail = new TextEncoder().encode("hello from the end\n");
    const gz = await run(
      "gzip",
      ["-9", "-c"],
      tar([["zeros.bin", new Uint8Array(64 * 1024 * 1024)], ["z.txt", tail]]),
    );
    const digest = `sha256:${"7e".repeat(32)}`;
    await store.put(digest, gz);
    const cfg = buildConfig({}, []);
    // 64 MiB from 64 KiB is past the default ratio budget; the read is what is under test
    cfg.global.index.maxUncompressedRatio = 100_000;
    for (const inflater of hasNative ? ["native", "web"] as const : ["web"] as const) {
      const { record } = await indexLayer({
        cfg,
        records: new IndexRecords(kv),
        store,
        digest,
        size: gz.length,
        inflater,
      });
      assert.equal(record.state, "ready", String(record.error));
      const reader = new LayerReader(store);
      let last = null;
      for await (const e of reader.entries(record)) last = e;
      assert.equal(last?.path, "z.txt");
      store.compressedRead = 0;
      const got = await readAllStream(
        await reader.read(digest, gz.length, record, last.offset, last.offset + last.size - 1),
      );
      assert.ok(equal(got, tail));
      // From the last checkpoint, not from the start: inflating all of it took ~250 ms here,
      // one interval a few ms. Counted in compressed bytes asked of the store rather than timed,
      // which a loaded machine would blur. A gzip -9 block of zeros holds ~8.5 MB, so the last
      // checkpoint may lie that far back (7,801 of 65,285 bytes here): a quarter is the bound.
      assert.ok(
        store.compressedRead > 0 && store.compressedRead <= gz.length / 4,
        `${inflater}: read ${store.compressedRead} of ${gz.length} compressed bytes`,
      );
    }
  } finally {
    kv.close();
    await Deno.remove(dir, { recursive: true });
  }
});

function text(size: number, seed: number): Uint8Array {
  const out = new Uint8Array(size);
  let x = seed;
  const words = new TextEncoder().encode("alpha beta gamma delta layer tar gzip zstd wharf ");
  for (let i = 0; i < size; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out[i] = (i >> 13) % 4 === 0 ? x >>> 24 : words[(x >>> 16) % words.length];
  }
  return out;
}

Deno.test("every unaligned offset (1-7 bits) resumes: reads from each checkpoint, cut and to the end", async () => {
  // words only: blocks of ~100 KB, ending anywhere in a byte
  const raw = text(3 * 1024 * 1024, 11).map((b) => b < 128 ? b : 32);
  const seen = new Set<number>();
  const layers = [
    await run("gzip", ["-9", "-c"], raw),
    await run("gzip", ["-1", "-c"], raw),
    zlib.gzipSync(raw, { level: 9 }),
    zlib.gzipSync(raw, { level: 6, strategy: zlib.constants.Z_RLE }),
  ];
  for (
    const [gz, native] of layers.flatMap((gz) =>
      (hasNative ? [false, true] : [false]).map((n) => [gz, n] as const)
    )
  ) {
    const p = pass(gz, native, 8192);
    const table = decodeTable(p.file);
    for (const c of table) seen.add(c.bits);
    for (let i = 0; i < table.length; i++) {
      const start = table[i].uoff;
      // a range cut at a following checkpoint (DecompressionStream); from the last checkpoints,
      // ranges to the blob's end (pako, then the trailer)
      const ends = [Math.min(raw.length - 1, start + 9000)];
      if (i >= table.length - 2) ends.push(raw.length - 1);
      for (const end of ends) {
        const got = await read(gz, p.file, start, end, 1 + (i * 977) % 70_000);
        assert.ok(equal(got.bytes, raw.subarray(start, end + 1)), `from ${start} to ${end}`);
      }
    }
  }
  assert.equal(seen.size, 8, `bit offsets seen: ${[...seen]}`);
});

Deno.test("the prefix for each bit offset inflates to the window in every inflater", async () => {
  const window = text(32768, 9);
  for (let bits = 0; bits < 8; bits++) {
    // the prefix, then a final empty fixed block from bit 8 - bits of its last byte
    const p = resumePrefix(window, bits);
    const used = (8 - bits) % 8;
    const stream = p.slice(0, used ? p.length - 1 : p.length);
    let last = used ? p[p.length - 1] : 0;
    last |= 0b011 << used;
    const end = [last & 0xff, last >> 8, 0].slice(0, Math.ceil((used + 10) / 8));
    const whole = new Uint8Array([...stream, ...end]);
    assert.ok(equal(new Uint8Array(zlib.inflateRawSync(whole)), window), `node: ${bits}`);
    const web = await readAllStream(
      ReadableStream.from([whole]).pipeThrough(new DecompressionStream("deflate-raw")),
    );
    assert.ok(equal(web, window), `DecompressionStream: ${bits}`);
  }
});

Deno.test("the prefix inside a fixed block, each bit offset: the blob's next code follows it", async () => {
  const window = text(32768, 4);
  for (let bits = 0; bits < 8; bits++) {
    for (const final of [false, true]) {
      // the prefix, then the fixed block's next codes as a blob would have them: a literal 'x'
      // (0x30 + 0x78, 8 bits, MSB first), end-of-block, then a final empty block if not final
      const p = resumePrefix(window, bits, { final });
      const used = (8 - bits) % 8;
      const w: number[] = [...p.slice(0, used ? p.length - 1 : p.length)];
      let acc = used ? p[p.length - 1] : 0;
      let n = used;
      const put = (v: number, len: number) => {
        for (let i = 0; i < len; i++) {
          acc |= ((v >>> i) & 1) << n;
          if (++n === 8) {
            w.push(acc);
            acc = 0;
            n = 0;
          }
        }
      };
      const lit = 0x30 + 0x78;
      for (let i = 7; i >= 0; i--) put((lit >>> i) & 1, 1);
      put(0, 7);
      if (!final) put(1, 1), put(1, 2), put(0, 7);
      if (n) w.push(acc);
      const whole = Uint8Array.from(w);
      const want = concat(window, Uint8Array.of(0x78));
      assert.ok(equal(new Uint8Array(zlib.inflateRawSync(whole)), want), `node: ${bits} ${final}`);
      const web = await readAllStream(
        ReadableStream.from([whole]).pipeThrough(new DecompressionStream("deflate-raw")),
      );
      assert.ok(equal(web, want), `DecompressionStream: ${bits} ${final}`);
    }
  }
});

Deno.test("a version 2 table (no fixed-block flag) still decodes, as block-boundary checkpoints", () => {
  const cps: Checkpoint[] = [
    { uoff: 0, coff: 10, member: true, bits: 0, window: new Uint8Array(0) },
    { uoff: 5_000_000, coff: 123_456, member: false, bits: 3, window: new Uint8Array(32768) },
  ];
  const t = decodeTable(encodeTable(cps, [0, 32768]), true);
  assert.deepEqual(t.map((c) => [c.member, c.bits, c.fixed, c.final]), [
    [true, 0, undefined, undefined],
    [false, 3, undefined, undefined],
  ]);
  // as version 2 wrote them: the member bit and the unused bits alone
  assert.equal(
    new DataView(encodeTable(cps, [0, 32768]).buffer).getUint32(4 + 24 + 16, true),
    3 << 8,
  );
  const inside = { ...cps[1], fixed: true, final: true };
  const bytes = encodeTable([inside, { ...inside, final: false }], [32768, 32768]);
  assert.deepEqual(decodeTable(bytes, true).map((c) => [c.bits, c.fixed, c.final]), [
    [3, true, true],
    [3, true, false],
  ]);
});

Deno.test("a version 1 table (flags 0 or 1) still decodes, as aligned checkpoints", () => {
  const cps: Checkpoint[] = [
    { uoff: 0, coff: 10, member: true, bits: 0, window: new Uint8Array(0) },
    { uoff: 5_000_000, coff: 123_456, member: false, bits: 0, window: new Uint8Array(32768) },
  ];
  const t = decodeTable(encodeTable(cps, [0, 32768]), true);
  assert.deepEqual(t.map((c) => [c.member, c.bits]), [[true, 0], [false, 0]]);
  const bytes = encodeTable([{ ...cps[1], bits: 5 }], [32768]);
  // flags as version 1 wrote them are the member bit alone
  assert.equal(new DataView(bytes.buffer).getUint32(4 + 16, true), 5 << 8);
});

const STRATEGIES = [
  zlib.constants.Z_DEFAULT_STRATEGY,
  zlib.constants.Z_FILTERED,
  zlib.constants.Z_HUFFMAN_ONLY,
  zlib.constants.Z_RLE,
  zlib.constants.Z_FIXED,
];

/** Runs of a byte, random bytes and text, concatenated. */
const content = fc.array(
  fc.oneof(
    fc.uint8Array({ maxLength: 30_000 }),
    fc.tuple(fc.nat(255), fc.integer({ min: 1, max: 400_000 })).map(([b, n]) =>
      new Uint8Array(n).fill(b)
    ),
    fc.tuple(fc.integer({ min: 1, max: 200_000 }), fc.nat()).map(([n, seed]) => text(n, seed)),
  ),
  { minLength: 1, maxLength: 6 },
).map((parts) => concat(...parts));

const compressor = fc.oneof(
  fc.constantFrom(1, 6, 9).map((level) => ({ cli: level, level, strategy: 0 })),
  fc.tuple(fc.integer({ min: 1, max: 9 }), fc.constantFrom(...STRATEGIES)).map((
    [level, strategy],
  ) => ({ cli: 0, level, strategy })),
);

Deno.test("fuzz: random data, compressors and ranges read back exactly (pako and native passes)", async () => {
  await fc.assert(
    fc.asyncProperty(
      content,
      compressor,
      fc.constantFrom(4096, 32768, 262144),
      fc.array(fc.tuple(fc.double({ min: 0, max: 1, noNaN: true }), fc.nat(300_000)), {
        minLength: 1,
        maxLength: 5,
      }),
      fc.integer({ min: 1, max: 100_000 }),
      async (data, c, spacing, ranges, piece) => {
        const gz = c.cli
          ? await run("gzip", [`-${c.cli}`, "-c"], data)
          : zlib.gzipSync(data, { level: c.level, strategy: c.strategy });
        const passes = [pass(gz, false, spacing, piece)];
        if (hasNative) passes.push(pass(gz, true, spacing, piece));
        if (hasNative) assert.deepEqual(passes[1].checkpoints, passes[0].checkpoints);
        for (const [s, len] of ranges) {
          if (data.length === 0) break;
          const start = Math.floor(s * (data.length - 1));
          const end = Math.min(data.length - 1, start + len);
          const got = await read(gz, passes[0].file, start, end, piece);
          assert.ok(equal(got.bytes, data.subarray(start, end + 1)), `bytes ${start}-${end}`);
        }
      },
    ),
    fuzzParams(0.1),
  );
});

// zlib-ng's level 1 (deflate_quick, Deno's own node:zlib among others) writes one static-Huffman
// block for as long as its input compresses well: 96 MiB of LCG output became one block. The
// pass takes checkpoints inside fixed blocks, at the first code after each 4 MiB of output.

/** Words drawn by an LCG: compressible enough for zlib-ng's level 1 to write one block. */
function words(size: number, seed: number): Uint8Array {
  const out = new Uint8Array(size);
  let x = seed;
  const w = new TextEncoder().encode("alpha beta gamma delta layer tar gzip zstd wharf ");
  for (let i = 0; i < size; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    out[i] = w[(x >>> 16) % w.length];
  }
  return out;
}

/**
 * Reads from each checkpoint of `p`: a range cut at the next one (its whole interval), and to the
 * data's end from the last two. Returns the most output a read within one interval inflated.
 */
async function readEach(gz: Uint8Array, raw: Uint8Array, p: Pass): Promise<number> {
  const table = decodeTable(p.file);
  let most = 0;
  for (let i = 0; i < table.length; i++) {
    const start = table[i].uoff;
    const ends = i + 1 < table.length ? [table[i + 1].uoff - 1] : [];
    if (i >= table.length - 2) ends.push(raw.length - 1);
    for (const end of ends) {
      if (end < start) continue;
      const got = await read(gz, p.file, start, end, 1 + (i * 7919) % 200_000);
      assert.ok(equal(got.bytes, raw.subarray(start, end + 1)), `from ${start} to ${end}`);
      if (end < (table[i + 1]?.uoff ?? Infinity)) most = Math.max(most, got.inflated);
    }
  }
  return most;
}

/** Both passes: identical checkpoints, one at most 4 MiB plus a match after the last. */
function fixedPasses(gz: Uint8Array, size: number, spacing = CHECKPOINT_SPACING): Pass {
  const passes = [pass(gz, false, spacing)];
  if (hasNative) passes.push(pass(gz, true, spacing));
  if (passes.length === 2) assert.deepEqual(passes[1].checkpoints, passes[0].checkpoints);
  const cps = passes[0].checkpoints;
  assert.ok(cps.length >= Math.floor(size / (spacing + 258)), `${cps.length} checkpoints`);
  for (let i = 1; i < cps.length; i++) {
    const gap = cps[i].uoff - cps[i - 1].uoff;
    assert.ok(gap >= spacing && gap <= spacing + 258, `gap ${gap}`);
  }
  assert.ok(size - cps[cps.length - 1].uoff <= spacing + 258);
  return passes[0];
}

Deno.test("one fixed block of 96 MiB of output: a checkpoint every ~4 MiB inside, every read exact and short", async () => {
  const gen = join(import.meta.dirname!, "../../tests/fixtures/hostile_layers.py");
  const out = await Deno.makeTempFile({ prefix: "wharf-long-block-" });
  try {
    const r = await new Deno.Command("python3", { args: [gen, "long_block", out] }).output();
    assert.ok(r.success, new TextDecoder().decode(r.stderr));
    const gz = await Deno.readFile(out);
    const raw = new Uint8Array(zlib.gunzipSync(gz));
    assert.equal(raw.length, 96 * 1024 * 1024 + 512 + 1024);
    const p = fixedPasses(gz, raw.length);
    // the tar header's block, then the one fixed block: every checkpoint after the first in it
    assert.ok(p.checkpoints.slice(1).every((c) => c.fixed && c.final));
    const most = await readEach(gz, raw, p);
    assert.ok(most <= CHECKPOINT_SPACING + 258, `a read inflated ${most}`);
  } finally {
    await Deno.remove(out);
  }
});

Deno.test("node:zlib level 1 of 96 MiB of words: one block, checkpointed every ~4 MiB", async () => {
  const raw = words(96 * 1024 * 1024, 7);
  const gz = new Uint8Array(zlib.gzipSync(raw, { level: 1 }));
  const p = fixedPasses(gz, raw.length);
  assert.ok(p.checkpoints.length >= 24, `${p.checkpoints.length}`);
  assert.ok(p.checkpoints.slice(1).every((c) => c.fixed));
  const most = await readEach(gz, raw, p);
  assert.ok(most <= CHECKPOINT_SPACING + 258, `a read inflated ${most}`);
});

Deno.test("checkpoints inside fixed blocks at every bit offset, last block or not, read back exactly", async () => {
  const raw = words(3 * 1024 * 1024, 5);
  const seen = new Set<string>();
  for (
    const gz of [
      zlib.gzipSync(raw, { level: 1 }),
      zlib.gzipSync(raw, { level: 6, strategy: zlib.constants.Z_FIXED }),
      zlib.gzipSync(raw, { level: 9, strategy: zlib.constants.Z_FIXED }),
      zlib.gzipSync(raw, { level: 3, strategy: zlib.constants.Z_FIXED }),
    ]
  ) {
    const p = fixedPasses(new Uint8Array(gz), raw.length, 16384);
    for (const c of p.checkpoints) if (c.fixed) seen.add(`${c.bits}${c.final ? "F" : "f"}`);
    const most = await readEach(new Uint8Array(gz), raw, p);
    assert.ok(most <= 16384 + 258, `a read inflated ${most}`);
  }
  assert.equal(seen.size, 16, `seen: ${[...seen]}`);
});

Deno.test("the index pass and LayerReader: reads at the end of one 96 MiB fixed block are short", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wharf-static-" });
  const kv = await Deno.openKv(join(dir, "kv"));
  try {
    const store = new FsBlobStore(join(dir, "store"));
    await store.init();
    const tail = words(100, 3);
    const layer = tar([["words.txt", words(96 * 1024 * 1024, 9)], ["z.txt", tail]]);
    const gz = new Uint8Array(zlib.gzipSync(layer, { level: 1 }));
    const digest = `sha256:${"5f".repeat(32)}`;
    await store.put(digest, gz);
    const cfg = buildConfig({}, []);
    cfg.global.index.maxUncompressedRatio = 100_000;
    for (const inflater of hasNative ? ["native", "web"] as const : ["web"] as const) {
      const { record } = await indexLayer({
        cfg,
        records: new IndexRecords(kv),
        store,
        digest,
        size: gz.length,
        inflater,
      });
      assert.equal(record.state, "ready", String(record.error));
      const reader = new LayerReader(store);
      let last = null;
      for await (const e of reader.entries(record)) last = e;
      assert.equal(last?.path, "z.txt");
      // three at once: none needs the long-read slot (each inflates ~4 MiB, not 96)
      const got = await Promise.all([0, 1, 2].map(async () =>
        await readAllStream(
          await reader.read(digest, gz.length, record, last.offset, last.offset + last.size - 1),
        )
      ));
      for (const g of got) assert.ok(equal(g, tail));
      if (inflater !== "web") continue;
      // As a version 2 table was (no checkpoints inside the block), the long-read slot still
      // bounds such reads: one at a time, the others 429. The fixed ones come last, so the
      // windows file's offsets still hold for the rest.
      const name = files.checkpoints(record.base);
      const table = decodeTable(await readAllStream(await store.readDerived(name)), true);
      const kept = table.filter((c) => !c.fixed);
      assert.ok(kept.length < table.length && table.slice(kept.length).every((c) => c.fixed));
      const v2 = encodeTable(
        kept.map((c) => ({ ...c, window: new Uint8Array(0) })),
        kept.map((c) => c.windowLength),
      );
      await store.writeDerived(name, ReadableStream.from([v2]));
      const old = new LayerReader(store);
      const three = await Promise.allSettled([0, 1, 2].map(async () =>
        await readAllStream(
          await old.read(digest, gz.length, record, last.offset, last.offset + last.size - 1),
        )
      ));
      const refused = three.filter((r) => r.status === "rejected");
      assert.ok(refused.length > 0 && refused.length < 3, `${refused.length} refused`);
      for (const r of three) {
        if (r.status === "fulfilled") assert.ok(equal(r.value, tail));
        else assert.equal((r.reason as { code?: string }).code, "TOOMANYREQUESTS");
      }
    }
  } finally {
    kv.close();
    await Deno.remove(dir, { recursive: true });
  }
});
