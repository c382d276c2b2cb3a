// Property and mutation fuzzing of the ZIP reader: OSV archives come from whoever serves them.
import assert from "node:assert/strict";
import zlib from "node:zlib";
import { ZipError, zipMembers, zipRead, ZipWindow } from "./zip.ts";
import { expectOnly, FAST_MS, fc, fuzzParams, mutated, within } from "../../tests/helpers/fuzz.ts";

const enc = new TextEncoder();

/** A ZIP of `files` (deflated or stored), optionally with ZIP64 extra fields and end records. */
function zipOf(files: [string, Uint8Array, boolean][], zip64 = false): Uint8Array {
  const parts: Uint8Array[] = [];
  const central: Uint8Array[] = [];
  let at = 0;
  for (const [name, data, deflate] of files) {
    const body = deflate ? new Uint8Array(zlib.deflateRawSync(data)) : data;
    const n = enc.encode(name);
    const lh = new Uint8Array(30 + n.length);
    const lv = new DataView(lh.buffer);
    lv.setUint32(0, 0x04034b50, true);
    lv.setUint16(8, deflate ? 8 : 0, true);
    lv.setUint32(18, body.length, true);
    lv.setUint32(22, data.length, true);
    lv.setUint16(26, n.length, true);
    lh.set(n, 30);
    const extra = zip64 ? new Uint8Array(4 + 24) : new Uint8Array(0);
    if (zip64) {
      const ev = new DataView(extra.buffer);
      ev.setUint16(0, 1, true);
      ev.setUint16(2, 24, true);
      ev.setBigUint64(4, BigInt(data.length), true);
      ev.setBigUint64(12, BigInt(body.length), true);
      ev.setBigUint64(20, BigInt(at), true);
    }
    const ch = new Uint8Array(46 + n.length + extra.length);
    const cv = new DataView(ch.buffer);
    cv.setUint32(0, 0x02014b50, true);
    cv.setUint16(10, deflate ? 8 : 0, true);
    cv.setUint32(20, zip64 ? 0xffffffff : body.length, true);
    cv.setUint32(24, zip64 ? 0xffffffff : data.length, true);
    cv.setUint16(28, n.length, true);
    cv.setUint16(30, extra.length, true);
    cv.setUint32(42, zip64 ? 0xffffffff : at, true);
    ch.set(n, 46);
    ch.set(extra, 46 + n.length);
    parts.push(lh, body);
    central.push(ch);
    at += lh.length + body.length;
  }
  const cdSize = central.reduce((s, c) => s + c.length, 0);
  const tail: Uint8Array[] = [];
  if (zip64) {
    const rec = new Uint8Array(56);
    const rv = new DataView(rec.buffer);
    rv.setUint32(0, 0x06064b50, true);
    rv.setBigUint64(32, BigInt(files.length), true);
    rv.setBigUint64(40, BigInt(cdSize), true);
    rv.setBigUint64(48, BigInt(at), true);
    const loc = new Uint8Array(20);
    const lv = new DataView(loc.buffer);
    lv.setUint32(0, 0x07064b50, true);
    lv.setBigUint64(8, BigInt(at + cdSize), true);
    tail.push(rec, loc);
  }
  const eocd = new Uint8Array(22);
  const ev = new DataView(eocd.buffer);
  ev.setUint32(0, 0x06054b50, true);
  ev.setUint16(10, zip64 ? 0xffff : files.length, true);
  ev.setUint32(12, zip64 ? 0xffffffff : cdSize, true);
  ev.setUint32(16, zip64 ? 0xffffffff : at, true);
  const all = [...parts, ...central, ...tail, eocd];
  const out = new Uint8Array(all.reduce((s, p) => s + p.length, 0));
  let w = 0;
  for (const p of all) {
    out.set(p, w);
    w += p.length;
  }
  return out;
}

const MAX = 1 << 20;

/** Lists and reads every member; only ZipErrors may come out, and nothing beyond MAX bytes. */
async function readZip(path: string, bytes: Uint8Array): Promise<Map<string, Uint8Array>> {
  await Deno.writeFile(path, bytes);
  const f = await Deno.open(path);
  const out = new Map<string, Uint8Array>();
  try {
    const members = await zipMembers(f, bytes.length);
    // each central directory entry takes 46 bytes at least
    assert.ok(members.length <= bytes.length / 46);
    const w = new ZipWindow(f, 4096);
    for (const m of members) {
      try {
        const b = await zipRead(w, m, MAX);
        assert.ok(b.length <= Math.max(1, m.size) && b.length <= MAX);
        out.set(m.name, b);
      } catch (e) {
        expectOnly(e, ZipError);
      }
    }
  } catch (e) {
    expectOnly(e, ZipError);
  } finally {
    f.close();
  }
  return out;
}

const filesArb = fc.array(
  fc.tuple(
    fc.string({ minLength: 1, maxLength: 20 }),
    fc.uint8Array({ maxLength: 600 }),
    fc
      .boolean(),
  ),
  { maxLength: 5 },
);

// --- regressions -----------------------------------------------------------------------------

/**
 * A central directory entry whose extra area (12 bytes) is shorter than the ZIP64 field in it
 * claims (24): the second 64-bit read ran past the entry's DataView and threw a RangeError,
 * not a ZipError.
 */
const REGRESSION_ZIP64_EXTRA_PAST_ENTRY = (() => {
  const z = zipOf([["a", enc.encode("x"), false]], true);
  const dv = new DataView(z.buffer);
  for (let i = 0; i < z.length - 4; i++) {
    if (dv.getUint32(i, true) === 0x02014b50) {
      dv.setUint16(i + 30, 12, true);
      break;
    }
  }
  return z;
})();

/**
 * A stored member of 1 byte whose compressed size says 4 GiB - 16: zipRead only checked `size`
 * against the cap and allocated a 4 GiB read buffer for the compressed bytes.
 */
const REGRESSION_HUGE_COMPRESSED_SIZE = (() => {
  const z = zipOf([["big", enc.encode("y"), false]]);
  const dv = new DataView(z.buffer);
  for (let i = 0; i < z.length - 4; i++) {
    if (dv.getUint32(i, true) === 0x02014b50) {
      dv.setUint32(i + 20, 0xfffffff0, true);
      break;
    }
  }
  return z;
})();

/**
 * A ZIP64 locator pointing its end record 17 TB into a 300-byte file: the seek there failed with
 * EINVAL, a TypeError out of zipMembers (found by the mutation property).
 */
const REGRESSION_ZIP64_RECORD_FAR_AWAY = (() => {
  const z = zipOf([["a", enc.encode("x"), false]], true);
  const dv = new DataView(z.buffer);
  dv.setBigUint64(z.length - 22 - 20 + 8, 0x1000000000f2n, true);
  return z;
})();

Deno.test("fuzz zip: regressions", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wharf-zip-fuzz-" });
  try {
    assert.equal((await readZip(`${dir}/a.zip`, REGRESSION_ZIP64_EXTRA_PAST_ENTRY)).size, 0);
    const got = await within(
      FAST_MS,
      "huge compressed size",
      () => readZip(`${dir}/b.zip`, REGRESSION_HUGE_COMPRESSED_SIZE),
    );
    assert.equal(got.size, 0);
    assert.equal((await readZip(`${dir}/c.zip`, REGRESSION_ZIP64_RECORD_FAR_AWAY)).size, 0);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

// --- properties ------------------------------------------------------------------------------

Deno.test("fuzz zip: archives round-trip, plain and ZIP64", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wharf-zip-fuzz-" });
  try {
    await fc.assert(
      fc.asyncProperty(filesArb, fc.boolean(), async (files, zip64) => {
        const got = await readZip(`${dir}/z.zip`, zipOf(files, zip64));
        const want = new Map<string, Uint8Array>();
        for (const [name, data] of files) if (!want.has(name)) want.set(name, data);
        // a repeated name is read twice; the last read wins in `got`
        for (const [name, data] of files) want.set(name, data);
        assert.deepEqual(
          [...got].map(([n, b]) => [n, [...b]]),
          [...want].map(([n, b]) => [n.replace(/[\ud800-\udfff]/g, "\ufffd"), [...b]]),
        );
      }),
      fuzzParams(0.5),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("fuzz zip: damaged archives fail with ZipError only, fast", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wharf-zip-fuzz-" });
  const samples = [
    zipOf([["a.json", enc.encode('{"id":"X"}'), true], ["b", new Uint8Array(300), false]]),
    zipOf([["a.json", enc.encode('{"id":"X"}'), true], ["b", new Uint8Array(300), true]], true),
  ];
  try {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.constantFrom(...samples).chain((s) => mutated(s, 6)),
          fc.uint8Array({ maxLength: 300 }),
        ),
        async (bytes) => {
          await within(FAST_MS, "readZip", () => readZip(`${dir}/z.zip`, bytes));
        },
      ),
      fuzzParams(),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
