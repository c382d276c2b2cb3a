// Property and mutation fuzzing of the zstd side copy: its frames, its table and reads by offset.
import assert from "node:assert/strict";
import {
  decodeFrames,
  decompressFrame,
  encodeFrames,
  type Frame,
  FRAME_SIZE,
  frameAt,
  FrameWriter,
} from "./zstd_frames.ts";
import { FAST_MS, fc, fuzzParams, mutated, within } from "../../tests/helpers/fuzz.ts";
import { concat } from "../../tests/helpers/bytes.ts";

async function sideCopy(chunks: Uint8Array[]): Promise<{ frames: Frame[]; file: Uint8Array }> {
  const written: Uint8Array[] = [];
  const w = new FrameWriter(new WritableStream<Uint8Array>({ write: (c) => void written.push(c) })
    .getWriter());
  for (const c of chunks) await w.push(c);
  const frames = await w.finish();
  return { frames, file: concat(...written) };
}

const chunksArb = fc.array(
  fc.oneof(
    fc.uint8Array({ maxLength: 3000 }),
    fc.tuple(fc.integer({ min: 0, max: 255 }), fc.integer({ min: 1, max: 700_000 })).map((
      [b, n],
    ) => new Uint8Array(n).fill(b)),
  ),
  { maxLength: 6 },
);

Deno.test("fuzz zstd: reads by offset from the side copy give back the original", async () => {
  await fc.assert(
    fc.asyncProperty(
      chunksArb,
      fc.array(fc.tuple(fc.double({ min: 0, max: 1, noNaN: true }), fc.nat(FRAME_SIZE * 2)), {
        maxLength: 3,
      }),
      async (chunks, ranges) => {
        const data = concat(...chunks);
        const { frames: written, file } = await sideCopy(chunks);
        const frames = decodeFrames(encodeFrames(written));
        assert.deepEqual(frames, written);
        assert.equal(frames.reduce((n, f) => n + f.ulen, 0), data.length);
        for (const [s, len] of ranges) {
          if (!data.length) break;
          const start = Math.floor(s * (data.length - 1));
          const end = Math.min(data.length - 1, start + len);
          // as layer_store.ts reads: from the frame holding `start`, frame by frame
          const parts: Uint8Array[] = [];
          for (let i = frameAt(frames, start), pos = start; pos <= end; i++) {
            const f = frames[i];
            const d = await decompressFrame(file.subarray(f.coff, f.coff + f.clen));
            const to = Math.min(f.ulen, end - f.uoff + 1);
            parts.push(d.subarray(pos - f.uoff, to));
            pos = f.uoff + to;
          }
          assert.deepEqual(concat(...parts), data.subarray(start, end + 1));
        }
      },
    ),
    fuzzParams(0.1),
  );
});

Deno.test("fuzz zstd: frameAt finds the frame holding any offset", () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 1, max: 100 }), { minLength: 1, maxLength: 30 }),
      fc
        .nat(),
      (lens, x) => {
        let uoff = 0;
        const frames = lens.map((ulen) => {
          const f = { uoff, coff: 0, clen: 0, ulen };
          uoff += ulen;
          return f;
        });
        const at = x % uoff;
        const i = frameAt(frames, at);
        assert.ok(frames[i].uoff <= at && at < frames[i].uoff + frames[i].ulen);
      },
    ),
    fuzzParams(),
  );
});

Deno.test("fuzz zstd: a damaged table throws a RangeError or decodes within its length", () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
      try {
        assert.ok(4 + decodeFrames(bytes).length * 24 <= bytes.length);
      } catch (e) {
        assert.ok(e instanceof RangeError, String(e));
      }
    }),
    fuzzParams(),
  );
});

/** A table cut short with a count of 2^32-1: entries were read until a DataView RangeError. */
const REGRESSION_TABLE_HUGE_COUNT = new Uint8Array([0xff, 0xff, 0xff, 0xff, 0, 0]);

Deno.test("fuzz zstd: regressions", () => {
  assert.throws(() => decodeFrames(REGRESSION_TABLE_HUGE_COUNT), /cut short/);
});

// With FUZZ_RUNS=20000 this property ended the test process: the callback form of
// zstdDecompress threw "Zstd decompress error: Data corruption detected" outside its callback
// for some damaged frame (reproducible at that run count; no single input was isolated: alone,
// in a loop, the inputs did not trigger it). decompressFrame is synchronous since.
Deno.test("fuzz zstd: a damaged frame fails with an Error, fast", async () => {
  const { file } = await sideCopy([new TextEncoder().encode("frame ".repeat(5000))]);
  await fc.assert(
    fc.asyncProperty(fc.oneof(mutated(file), fc.uint8Array({ maxLength: 512 })), async (bad) => {
      await within(FAST_MS, "decompressFrame", async () => {
        try {
          const out = await decompressFrame(bad);
          // zstd frames declare their size: a damaged one cannot grow without bound
          assert.ok(out.length <= 64 * 1024 * 1024);
        } catch (e) {
          assert.ok(e instanceof Error, String(e));
        }
      });
    }),
    fuzzParams(),
  );
});
