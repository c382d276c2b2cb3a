import assert from "node:assert/strict";
import { FsBlobStore } from "./fs_blob_store.ts";
import { allocRing } from "./fs_read.ts";
import { blobStoreContract } from "../../tests/helpers/blob_store_contract.ts";

blobStoreContract("fs", async () => {
  const dir = await Deno.makeTempDir();
  const store = new FsBlobStore(dir);
  await store.init();
  return { store, partSize: 0, cleanup: () => Deno.remove(dir, { recursive: true }) };
});

async function collect(s: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(s).arrayBuffer());
}

const D = `sha256:${"c".repeat(64)}`;

Deno.test("reads are exact on both the byte-stream and the native path, whole and ranged", async () => {
  const dir = await Deno.makeTempDir();
  const store = new FsBlobStore(dir);
  await store.init();
  // Over the 32 MiB from which a read takes the byte-stream (ring) path.
  const data = new Uint8Array((33 << 20) + 17).map((_, i) => (i * 31) & 0xff);
  await store.put(D, data);
  // The first open stream takes the byte-stream path; while it is open, later reads take the
  // native one. Both must return the same bytes.
  const first = await store.read(D);
  const whole = await store.read(D);
  const ranged = await store.read(D, { start: 1_000_000, end: 2_500_000 });
  const small = await store.read(D, { start: 100, end: 200 }); // under 32 MiB: native even alone
  assert.deepEqual(await collect(whole), data);
  assert.deepEqual(await collect(ranged), data.subarray(1_000_000, 2_500_001));
  assert.deepEqual(await collect(first), data);
  assert.deepEqual(await collect(small), data.subarray(100, 201));
  // Alone and long enough: a ranged read takes the ring from a seeked, unaligned position.
  const ringRange = await store.read(D, { start: 3, end: (33 << 20) + 5 });
  assert.deepEqual(await collect(ringRange), data.subarray(3, (33 << 20) + 6));
  const again = await store.read(D, { start: 5, end: 9 });
  assert.deepEqual(await collect(again), data.subarray(5, 10));
  await Deno.remove(dir, { recursive: true });
});

Deno.test("ring buffers start on a page boundary plus the file position's cache-line offset", () => {
  // Tests run with -A, so the address is readable (see allocRing for why alignment matters).
  for (const position of [0, 1 << 20, 7, 4096 + 63, (5 << 20) + 17]) {
    const ring = allocRing(position);
    assert.equal(ring.length, 4);
    for (const buf of ring) {
      assert.equal(buf.byteLength, 2 << 20);
      const addr = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(buf)));
      assert.equal(Number(addr % 4096n), position % 64, `position ${position}`);
    }
    // Distinct, non-overlapping slots of one allocation.
    assert.equal(new Set(ring.map((b) => b.byteOffset)).size, 4);
    for (let i = 1; i < ring.length; i++) {
      assert.equal(ring[i].byteOffset - ring[i - 1].byteOffset, 2 << 20);
    }
  }
});
