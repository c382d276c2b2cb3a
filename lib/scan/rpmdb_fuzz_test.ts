// Property and mutation fuzzing of rpm's databases: header blobs, BerkeleyDB and SQLite.
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { parseRpmBdb, parseRpmHeaderBlob, parseRpmSqlite, RpmHeaderError } from "./rpmdb.ts";
import { BdbError, bdbHashValues } from "./rpm_bdb.ts";
import {
  expectOnly,
  FAST_MS,
  fc,
  fuzzParams,
  mutated,
  within,
  withinSync,
} from "../../tests/helpers/fuzz.ts";

const enc = new TextEncoder();

/** A header blob of string tags (type 6) and int32 tags (type 4). */
function headerBlob(strings: [number, string][], ints: [number, number][] = []): Uint8Array {
  const data: number[] = [];
  const index: [number, number, number, number][] = [];
  for (const [tag, v] of ints) {
    while (data.length % 4) data.push(0);
    index.push([tag, 4, data.length, 1]);
    data.push((v >>> 24) & 255, (v >>> 16) & 255, (v >>> 8) & 255, v & 255);
  }
  for (const [tag, s] of strings) {
    index.push([tag, 6, data.length, 1]);
    data.push(...enc.encode(s), 0);
  }
  const b = new Uint8Array(8 + index.length * 16 + data.length);
  const v = new DataView(b.buffer);
  v.setUint32(0, index.length);
  v.setUint32(4, data.length);
  index.forEach((e, i) => e.forEach((x, j) => v.setUint32(8 + i * 16 + j * 4, x)));
  b.set(data, 8 + index.length * 16);
  return b;
}

const SAMPLE = headerBlob(
  [[1000, "bash"], [1001, "5.1.8"], [1002, "9.el9"], [1022, "x86_64"], [
    1044,
    "bash-5.1.8-9.el9.src.rpm",
  ]],
  [[1003, 1]],
);

Deno.test("fuzz rpm: header blobs round-trip", () => {
  const s = fc.stringMatching(/^[A-Za-z0-9._+~^-]{1,30}$/);
  fc.assert(
    fc.property(s, s, s, fc.option(fc.integer({ min: 0, max: 1000 })), (n, v, r, epoch) => {
      const h = parseRpmHeaderBlob(
        headerBlob([[1000, n], [1001, v], [1002, r]], epoch === null ? [] : [[1003, epoch]]),
      );
      assert.deepEqual([h.name, h.version, h.release, h.epoch], [n, v, r, epoch]);
    }),
    fuzzParams(),
  );
});

Deno.test("fuzz rpm: damaged header blobs throw RpmHeaderError only, fast", () => {
  fc.assert(
    fc.property(fc.oneof(mutated(SAMPLE, 10), fc.uint8Array({ maxLength: 200 })), (b) => {
      try {
        withinSync(FAST_MS, "parseRpmHeaderBlob", () => parseRpmHeaderBlob(b));
      } catch (e) {
        expectOnly(e, RpmHeaderError);
      }
    }),
    fuzzParams(),
  );
});

/** A minimal BerkeleyDB hash file: metadata page and one hash page of key/value pairs. */
function bdbOf(values: Uint8Array[], pageSize = 4096): Uint8Array {
  const b = new Uint8Array(pageSize * 2);
  const v = new DataView(b.buffer);
  v.setUint32(12, 0x061561, true);
  v.setUint32(20, pageSize, true);
  b[25] = 8;
  v.setUint32(32, 1, true);
  const at = pageSize;
  b[at + 25] = 13;
  let end = pageSize;
  const offsets: number[] = [];
  for (const [i, val] of values.entries()) {
    const key = new Uint8Array([1, 0, 0, 0, i]);
    for (const item of [key, new Uint8Array([1, ...val])]) {
      end -= item.length;
      b.set(item, at + end);
      offsets.push(end);
    }
  }
  v.setUint16(at + 20, offsets.length, true);
  offsets.forEach((o, i) => v.setUint16(at + 26 + i * 2, o, true));
  return b;
}

Deno.test("fuzz rpm: BerkeleyDB values round-trip and damage is a BdbError", () => {
  fc.assert(
    fc.property(fc.array(fc.uint8Array({ minLength: 1, maxLength: 100 }), { maxLength: 20 }), (
      vals,
    ) => {
      assert.deepEqual(bdbHashValues(bdbOf(vals)).values, vals);
    }),
    fuzzParams(),
  );
  const sample = bdbOf([SAMPLE, SAMPLE], 512);
  assert.equal(parseRpmBdb(sample, "p").packages.length, 2);
  fc.assert(
    fc.property(mutated(sample, 10), (b) => {
      try {
        withinSync(FAST_MS, "bdbHashValues", () => bdbHashValues(b));
      } catch (e) {
        expectOnly(e, BdbError);
      }
      const r = withinSync(FAST_MS, "parseRpmBdb", () => parseRpmBdb(b, "p"));
      assert.ok(r.packages.length <= 2 * 10);
    }),
    fuzzParams(),
  );
});

/**
 * Many index entries pointing at one long unterminated-until-the-end string: each entry scans
 * the data store for its NUL again before the tag is found to be a repeat, so the time grows
 * with entries × data (20k entries × 1 MB: ~seconds for a 1.3 MB blob).
 */
const QUADRATIC_HEADER = (() => {
  const il = 20_000, dl = 1_000_000;
  const b = new Uint8Array(8 + il * 16 + dl);
  const v = new DataView(b.buffer);
  v.setUint32(0, il);
  v.setUint32(4, dl);
  for (let i = 0; i < il; i++) v.setUint32(8 + i * 16 + 4, 6); // tag 0, STRING, offset 0
  b.fill(0x61, 8 + il * 16, b.length - 1);
  return b;
})();

Deno.test({
  name: "fuzz rpm: a header's parse time is linear in its size",
  // Regression: QUADRATIC_HEADER (20 000 index entries of tag 0 type 6 offset 0 over 1 MB of
  // "a" ending in one NUL) was scanned for a NUL once per entry: O(entries × data), 6.7 s for
  // one 1.3 MB blob. Strings are now read only for the reported tags, each within a bound.
  fn() {
    withinSync(FAST_MS / 4, "quadratic header", () => {
      try {
        parseRpmHeaderBlob(QUADRATIC_HEADER);
      } catch (e) {
        expectOnly(e, RpmHeaderError);
      }
    });
  },
});

Deno.test("fuzz rpm: damaged SQLite databases give warnings, never throws", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wharf-rpm-fuzz-" });
  try {
    const path = `${dir}/rpmdb.sqlite`;
    const db = new DatabaseSync(path);
    db.exec("CREATE TABLE Packages (hnum INTEGER PRIMARY KEY, blob BLOB NOT NULL)");
    const ins = db.prepare("INSERT INTO Packages (blob) VALUES (?)");
    for (let i = 0; i < 3; i++) ins.run(SAMPLE);
    db.close();
    const sample = await Deno.readFile(path);
    assert.equal(parseRpmSqlite(sample, "s").packages.length, 3);
    await fc.assert(
      fc.asyncProperty(mutated(sample, 6), async (b) => {
        const r = await within(FAST_MS, "parseRpmSqlite", () => parseRpmSqlite(b, "s"));
        assert.ok(r.packages.length <= 3 + 100);
      }),
      fuzzParams(0.25),
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
