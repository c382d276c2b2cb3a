import assert from "node:assert/strict";
import { allocRing, FsBlobStore } from "./fs_blob_store.ts";

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

Deno.test("appendUpload truncates past the committed offset and reports a cut body", async () => {
  const dir = await Deno.makeTempDir();
  const store = new FsBlobStore(dir);
  await store.init();
  const u = crypto.randomUUID();
  const seen: number[] = [];
  const opts = { maxBytes: 1 << 20, onChunk: (c: Uint8Array) => seen.push(c.byteLength) };
  await store.appendUpload(u, 0, ReadableStream.from([new Uint8Array(10).fill(1)]), opts);
  // A crash after writing bytes 10..19 but before committing offset 20: resume from 10.
  await store.appendUpload(u, 10, ReadableStream.from([new Uint8Array(10).fill(2)]), opts);
  const r = await store.appendUpload(u, 10, ReadableStream.from([new Uint8Array(5).fill(3)]), opts);
  assert.deepEqual(r, { written: 5, cut: false });
  const bytes = await collect(await store.readUpload(u, 15));
  assert.deepEqual(bytes, new Uint8Array([...new Array(10).fill(1), ...new Array(5).fill(3)]));
  let pulls = 0;
  const failing = new ReadableStream<Uint8Array>({
    pull(c) {
      if (pulls++ === 0) c.enqueue(new Uint8Array(4));
      else c.error(new Error("connection reset"));
    },
  });
  assert.deepEqual(await store.appendUpload(u, 15, failing, opts), { written: 4, cut: true });
  await Deno.remove(dir, { recursive: true });
});

Deno.test("ring buffers start on a page boundary plus the file position's cache-line offset", () => {
  // Tests run with -A, so the address is readable (see allocRing for why alignment matters).
  for (const position of [0, 1 << 20, 7, 4096 + 63, (5 << 20) + 17]) {
    const ring = allocRing(position);
    assert.equal(ring.length, 4);
    for (const buf of ring) {
      assert.equal(buf.byteLength, 1 << 20);
      const addr = BigInt(Deno.UnsafePointer.value(Deno.UnsafePointer.of(buf)));
      assert.equal(Number(addr % 4096n), position % 64, `position ${position}`);
    }
    // Distinct, non-overlapping slots of one allocation.
    assert.equal(new Set(ring.map((b) => b.byteOffset)).size, 4);
    for (let i = 1; i < ring.length; i++) {
      assert.equal(ring[i].byteOffset - ring[i - 1].byteOffset, 1 << 20);
    }
  }
});

Deno.test("derived files: written whole, read whole or ranged, deleted by prefix, names confined", async () => {
  const dir = await Deno.makeTempDir();
  const store = new FsBlobStore(dir);
  await store.init();
  try {
    const data = new Uint8Array(100_000).map((_, i) => i % 251);
    const n = await store.writeDerived(
      "index/sha256/ab/run1/listing.ndjson",
      ReadableStream.from([data.subarray(0, 30_000), data.subarray(30_000)]),
    );
    assert.equal(n, data.length);
    const all = new Uint8Array(
      await new Response(await store.readDerived("index/sha256/ab/run1/listing.ndjson"))
        .arrayBuffer(),
    );
    assert.deepEqual(all, data);
    const part = new Uint8Array(
      await new Response(
        await store.readDerived("index/sha256/ab/run1/listing.ndjson", {
          start: 99_990,
          end: 99_999,
        }),
      ).arrayBuffer(),
    );
    assert.deepEqual(part, data.subarray(99_990));
    // A failed write leaves nothing (and no temporary) behind.
    const failing = new ReadableStream<Uint8Array>({
      pull(c) {
        c.error(new Error("source broke"));
      },
    });
    await assert.rejects(store.writeDerived("index/sha256/ab/run2/x", failing), /source broke/);
    await assert.rejects(store.readDerived("index/sha256/ab/run2/x"), Deno.errors.NotFound);
    for await (const u of store.listUploads()) assert.fail(`temporary left: ${u.name}`);
    await store.deleteDerived("index/sha256/ab");
    await assert.rejects(
      store.readDerived("index/sha256/ab/run1/listing.ndjson"),
      Deno.errors.NotFound,
    );
    await store.deleteDerived("index/sha256/ab"); // absent: no error
    for (const bad of ["../x", "a/../../x", "/abs", "A/b", "a//b", "a/./b", ""]) {
      await assert.rejects(
        store.writeDerived(bad, ReadableStream.from([])),
        /invalid derived file name/,
      );
      await assert.rejects(store.readDerived(bad), /invalid derived file name/);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
