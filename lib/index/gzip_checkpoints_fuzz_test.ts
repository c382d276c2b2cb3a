// Property and mutation fuzzing of gzip random access: the checkpoint pass reads pushed layers,
// and every ranged read from a checkpoint must give back the original bytes.
import assert from "node:assert/strict";
import zlib from "node:zlib";
import { type Checkpoint, CheckpointBuilder } from "./gzip_checkpoints.ts";
import {
  decodeTable,
  encodeCheckpoints,
  encodeTable,
  following,
  nearest,
} from "./checkpoint_table.ts";
import { compressedRange, inflateFrom } from "./gzip_read.ts";
import { FAST_MS, fc, fuzzParams, mutated, within } from "../../tests/helpers/fuzz.ts";
import { concat } from "../../tests/helpers/bytes.ts";

async function readAll(s: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return concat(...await Array.fromAsync(s));
}

/** Compressible or not: runs of a small alphabet, random bytes, or text. */
const content = fc.array(
  fc.oneof(
    fc.uint8Array({ maxLength: 40_000 }),
    fc.tuple(fc.integer({ min: 0, max: 255 }), fc.integer({ min: 1, max: 60_000 })).map((
      [b, n],
    ) => new Uint8Array(n).fill(b)),
    fc.string({ maxLength: 2000 }).map((s) => new TextEncoder().encode(s.repeat(10))),
  ),
  { minLength: 1, maxLength: 8 },
).map((parts) => concat(...parts));

/** gzip as writers produce it: one member, or several concatenated. */
function gzip(data: Uint8Array, level: number, members: number): Uint8Array {
  const cuts = Array.from({ length: members }, (_, i) => Math.floor(data.length * i / members));
  const out = cuts.map((c, i) =>
    zlib.gzipSync(data.subarray(c, i + 1 < members ? cuts[i + 1] : data.length), { level })
  );
  const blob = new Uint8Array(out.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of out) {
    blob.set(p, at);
    at += p.length;
  }
  return blob;
}

function build(blob: Uint8Array, spacing: number, cuts: number[]) {
  const b = new CheckpointBuilder(spacing);
  let prev = 0;
  for (const c of [...cuts.map((x) => Math.floor(x * blob.length)).sort((x, y) => x - y)]) {
    if (c > prev) b.push(blob.subarray(prev, c));
    prev = Math.max(prev, c);
  }
  if (prev < blob.length) b.push(blob.subarray(prev));
  return b.finish();
}

/** A ranged read as layer_store.ts makes it, from an encoded checkpoint file. */
async function rangedRead(
  blob: Uint8Array,
  file: Uint8Array,
  start: number,
  end: number,
): Promise<Uint8Array> {
  const table = decodeTable(file);
  const cp = nearest(table, start) ??
    { uoff: 0, coff: 0, member: true, bits: 0, windowAt: 0, windowLength: 0 };
  const window = file.subarray(cp.windowAt, cp.windowAt + cp.windowLength);
  const next = following(table, end, cp);
  const r = compressedRange(cp, next, blob.length);
  const compressed = blob.subarray(r.start, r.end + 1);
  const chunks: Uint8Array[] = [];
  for (let at = 0; at < compressed.length; at += 7919) {
    chunks.push(compressed.slice(at, at + 7919));
  }
  const all = await readAll(
    inflateFrom(window, cp, ReadableStream.from(chunks), r.cut ? next : null),
  );
  return all.subarray(start - cp.uoff, start - cp.uoff + (end - start + 1));
}

Deno.test("fuzz gzip: ranged reads from checkpoints give back the original bytes", async () => {
  await fc.assert(
    fc.asyncProperty(
      content,
      fc.integer({ min: 1, max: 9 }),
      fc.integer({ min: 1, max: 3 }),
      fc.constantFrom(1024, 8192, 65536),
      fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 8 }),
      fc.array(fc.tuple(fc.double({ min: 0, max: 1, noNaN: true }), fc.nat(70_000)), {
        minLength: 1,
        maxLength: 4,
      }),
      async (data, level, members, spacing, cuts, ranges) => {
        const blob = gzip(data, level, members);
        const r = build(blob, spacing, cuts);
        assert.equal(r.error, null);
        assert.ok(r.complete);
        // the checkpoints are in order (an empty member starts where the last one ended)
        for (let i = 1; i < r.checkpoints.length; i++) {
          assert.ok(r.checkpoints[i].uoff >= r.checkpoints[i - 1].uoff);
          assert.ok(r.checkpoints[i].coff > r.checkpoints[i - 1].coff);
        }
        for (const c of r.checkpoints) {
          assert.ok(c.uoff <= data.length && c.coff < blob.length && c.window.length <= 32768);
        }
        const file = encodeCheckpoints(r.checkpoints);
        for (const [s, len] of ranges) {
          if (data.length === 0) break;
          const start = Math.floor(s * (data.length - 1));
          const end = Math.min(data.length - 1, start + len);
          const got = await rangedRead(blob, file, start, end);
          assert.deepEqual(got, data.subarray(start, end + 1), `bytes ${start}-${end}`);
        }
      },
    ),
    fuzzParams(0.25),
  );
});

Deno.test("fuzz gzip: the table encodings round-trip", () => {
  const cp = fc.record({
    uoff: fc.nat(),
    coff: fc.nat(),
    member: fc.boolean(),
    bits: fc.integer({ min: 0, max: 7 }),
    window: fc.uint8Array({ maxLength: 64 }),
    fixed: fc.boolean(),
    final: fc.boolean(),
  }, { requiredKeys: ["uoff", "coff", "member", "bits", "window"] });
  fc.assert(
    fc.property(fc.array(cp, { maxLength: 20 }), (cps: Checkpoint[]) => {
      const whole = decodeTable(encodeCheckpoints(cps));
      const separate = decodeTable(encodeTable(cps, cps.map((c) => c.window.length)), true);
      let at = 4 + 24 * cps.length;
      let w = 0;
      cps.forEach((c, i) => {
        const base = {
          uoff: c.uoff,
          coff: c.coff,
          member: c.member,
          bits: c.bits,
          ...(c.fixed ? { fixed: true, final: c.final === true } : {}),
        };
        assert.deepEqual(whole[i], { ...base, windowAt: at, windowLength: c.window.length });
        assert.deepEqual(separate[i], { ...base, windowAt: w, windowLength: c.window.length });
        at += c.window.length;
        w += c.window.length;
      });
      assert.equal(whole.length, cps.length);
    }),
    fuzzParams(),
  );
});

Deno.test("fuzz gzip: a damaged table throws a RangeError or decodes within its length", () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 400 }), fc.boolean(), (bytes, separate) => {
      try {
        const t = decodeTable(bytes, separate);
        assert.ok(4 + t.length * 24 <= bytes.length);
      } catch (e) {
        assert.ok(e instanceof RangeError, String(e));
      }
    }),
    fuzzParams(),
  );
});

/** A cut-short table claiming 2^32-1 entries: read entry by entry until a DataView RangeError. */
const REGRESSION_TABLE_HUGE_COUNT = new Uint8Array([0xff, 0xff, 0xff, 0xff, 1, 2, 3]);

/**
 * Two gzip members of five spaces each, read from byte 0 to 5: the read starts at the raw
 * checkpoint inside the first member and node:zlib's inflateRaw stopped at that member's end,
 * so the byte from the second member was missing ("layer data ended early").
 */
const REGRESSION_READ_ACROSS_MEMBERS = {
  blob: Uint8Array.from([
    ...zlib.gzipSync(new Uint8Array(5).fill(32), { level: 1 }),
    ...zlib.gzipSync(new Uint8Array(5).fill(32), { level: 1 }),
  ]),
  start: 0,
  end: 5,
};

Deno.test("fuzz gzip: regressions", async () => {
  const { blob, start, end } = REGRESSION_READ_ACROSS_MEMBERS;
  const file = encodeCheckpoints(build(blob, 1024, []).checkpoints);
  assert.deepEqual(await rangedRead(blob, file, start, end), new Uint8Array(6).fill(32));

  // Two members of 1,033 and 1,034 zeros (level 1: one fixed block each), bytes 0-1033: the
  // checkpoint after the read's end was inside the second member's block, and the range cut there
  // went on raw past the first member's end ("failed to write whole buffer").
  const zeros = new Uint8Array(2067);
  const two = gzip(zeros, 1, 2);
  const cps = build(two, 1024, []).checkpoints;
  assert.ok(cps.some((c) => c.fixed), "a checkpoint inside the second member's block");
  assert.deepEqual(await rangedRead(two, encodeCheckpoints(cps), 0, 1033), zeros.subarray(0, 1034));

  assert.throws(() => decodeTable(REGRESSION_TABLE_HUGE_COUNT), /cut short/);
  assert.throws(() => decodeTable(new Uint8Array(0)), /cut short/);
});

const SAMPLE = gzip(
  new TextEncoder().encode("layer ".repeat(20_000) + "tail"),
  6,
  2,
);

Deno.test("fuzz gzip: damaged gzip never throws out of the checkpoint pass", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.oneof(mutated(SAMPLE), fc.uint8Array({ maxLength: 2048 })),
      fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 5 }),
      async (blob, cuts) => {
        const r = await within(FAST_MS, "checkpoint pass", () => build(blob, 1024, cuts));
        assert.equal(r.complete, r.error === null);
        // the window ring and table stay bounded: a checkpoint needs 1 KiB of output
        assert.ok(r.checkpoints.length <= 1 + blob.length * 1100 / 1024);
      },
    ),
    fuzzParams(),
  );
});

Deno.test("fuzz gzip: a damaged range inflates to data or an error, never a hang", async () => {
  const data = new TextEncoder().encode("0123456789abcdef".repeat(8000));
  const blob = gzip(data, 1, 1);
  const file = encodeCheckpoints(build(blob, 4096, []).checkpoints);
  await fc.assert(
    fc.asyncProperty(mutated(blob), fc.nat(data.length - 1), async (bad, start) => {
      await within(FAST_MS, "ranged read", async () => {
        try {
          const got = await rangedRead(bad, file, start, Math.min(data.length - 1, start + 999));
          assert.ok(got.length <= 1000);
        } catch (e) {
          // node:zlib and DecompressionStream report corrupt data as Errors or TypeErrors
          assert.ok(e instanceof Error, String(e));
        }
      });
    }),
    fuzzParams(0.5),
  );
});
