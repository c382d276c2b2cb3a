import assert from "node:assert/strict";
import { sealTable, unsealTable } from "./table_seal.ts";
import { decodeTable, encodeTable } from "./checkpoint_table.ts";
import { decodeFrames, encodeFrames } from "./zstd_frames.ts";

const frames = [
  { uoff: 0, coff: 0, clen: 1000, ulen: 4 << 20 },
  { uoff: 4 << 20, coff: 1000, clen: 900, ulen: 1234 },
];
const checkpoints = [
  { uoff: 0, coff: 10, member: true, bits: 0, window: new Uint8Array(0) },
  { uoff: 4 << 20, coff: 5000, member: false, bits: 3, window: new Uint8Array(0) },
];

Deno.test("a sealed table reads back, and an older reader's decoder still reads it", () => {
  const table = encodeFrames(frames);
  const sealed = sealTable(table);
  assert.equal(sealed.byteLength, table.byteLength + 40);
  assert.deepEqual(unsealTable(sealed), table);
  assert.deepEqual(decodeFrames(unsealTable(sealed)!), frames);
  assert.deepEqual(decodeFrames(sealed), frames, "decoders stop at the count");
  const cp = encodeTable(checkpoints, [0, 0]);
  assert.deepEqual(decodeTable(unsealTable(sealTable(cp))!, true), decodeTable(cp, true));
});

Deno.test("a table written before seals reads unchecked", () => {
  const table = encodeFrames(frames);
  assert.equal(unsealTable(table), table);
});

Deno.test("any flipped byte of a sealed table, and a cut or grown one, is refused", () => {
  const sealed = sealTable(encodeFrames(frames));
  for (let i = 0; i < sealed.byteLength; i++) {
    const bad = sealed.slice();
    bad[i] ^= 0x10;
    assert.equal(unsealTable(bad), null, `byte ${i}`);
  }
  assert.equal(unsealTable(sealed.subarray(0, sealed.byteLength - 1)), null);
  assert.equal(unsealTable(new Uint8Array([...sealed, 0])), null);
  assert.equal(unsealTable(new Uint8Array(3)), null);
});
