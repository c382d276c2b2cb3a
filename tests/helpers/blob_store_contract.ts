// The behaviour every BlobStore backend must share (DESIGN.md: a new backend passes the same
// contract suite as the first). Each backend's test file calls `blobStoreContract` with a
// factory that gives a fresh, empty store.
import assert from "node:assert/strict";
import {
  type BlobStore,
  CorruptBlobError,
  readVerified,
  TooLargeError,
} from "../../lib/storage/mod.ts";
import { sha256Hex } from "./server.ts";

export interface ContractStore {
  store: BlobStore;
  /** the size at which the store cuts uploads into parts (0: it does not) */
  partSize: number;
  cleanup(): Promise<void>;
}

async function collect(s: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  return new Uint8Array(await new Response(s).arrayBuffer());
}

function pattern(n: number, seed = 31): Uint8Array {
  return new Uint8Array(n).map((_, i) => (i * seed + (i >> 11)) & 0xff);
}

async function names(it: AsyncIterable<{ name: string }>): Promise<string[]> {
  const out: string[] = [];
  for await (const o of it) out.push(o.name);
  return out.sort();
}

/** Splits `data` into a stream of chunks of the given sizes (cycled). */
function chunked(data: Uint8Array, sizes: number[]): ReadableStream<Uint8Array> {
  const out: Uint8Array[] = [];
  let at = 0;
  for (let i = 0; at < data.length; i++) {
    const n = sizes[i % sizes.length];
    out.push(data.slice(at, at + n));
    at += n;
  }
  return ReadableStream.from(out);
}

export function blobStoreContract(
  backend: string,
  make: () => Promise<ContractStore>,
  opts: { sanitize?: boolean } = {},
): void {
  const test = (name: string, fn: (c: ContractStore) => Promise<void>) =>
    Deno.test({
      name: `${backend} store: ${name}`,
      sanitizeOps: opts.sanitize ?? true,
      sanitizeResources: opts.sanitize ?? true,
      fn: async () => {
        const c = await make();
        try {
          await fn(c);
        } finally {
          await c.cleanup();
        }
      },
    });

  test("blobs: put, exists, read whole and ranged, readAll, delete, NotFound", async ({ store }) => {
    const data = pattern(300_000);
    const d = `sha256:${await sha256Hex(data)}`;
    assert.equal(await store.exists(d), false);
    await assert.rejects(async () => await collect(await store.read(d)), Deno.errors.NotFound);
    await store.put(d, data);
    assert.equal(await store.exists(d), true);
    assert.deepEqual(await collect(await store.read(d)), data);
    assert.deepEqual(
      await collect(await store.read(d, { start: 1000, end: 250_000 })),
      data.subarray(1000, 250_001),
    );
    assert.deepEqual(await store.readAll(d), data);
    assert.deepEqual(await names(store.listBlobs()), [d]);
    for await (const b of store.listBlobs()) {
      assert.equal(b.size, data.length);
      assert.ok(Math.abs(b.mtime - Date.now()) < 120_000, `mtime ${b.mtime}`);
    }
    await store.delete(d);
    assert.equal(await store.exists(d), false);
    await store.delete(d); // absent: no error
    assert.deepEqual(await names(store.listBlobs()), []);
  });

  test("appendUpload truncates past the committed offset and reports a cut body", async ({ store }) => {
    const u = crypto.randomUUID();
    const seen: number[] = [];
    const opts = { maxBytes: 1 << 20, onChunk: (c: Uint8Array) => seen.push(c.byteLength) };
    await store.appendUpload(u, 0, ReadableStream.from([new Uint8Array(10).fill(1)]), opts);
    // A crash after writing bytes 10..19 but before committing offset 20: resume from 10.
    await store.appendUpload(u, 10, ReadableStream.from([new Uint8Array(10).fill(2)]), opts);
    const r = await store.appendUpload(
      u,
      10,
      ReadableStream.from([new Uint8Array(5).fill(3)]),
      opts,
    );
    assert.deepEqual(r, { written: 5, cut: false });
    const bytes = await collect(await store.readUpload(u, 15));
    assert.deepEqual(bytes, new Uint8Array([...new Array(10).fill(1), ...new Array(5).fill(3)]));
    let pulls = 0;
    const failing = new ReadableStream<Uint8Array>({
      pull(c) {
        if (pulls++ === 0) c.enqueue(new Uint8Array(4).fill(4));
        else c.error(new Error("connection reset"));
      },
    });
    assert.deepEqual(await store.appendUpload(u, 15, failing, opts), { written: 4, cut: true });
    // What arrived before the cut is kept (PATCH rule 5).
    assert.deepEqual(
      (await collect(await store.readUpload(u, 19))).subarray(15),
      new Uint8Array(4).fill(4),
    );
    assert.deepEqual(seen.reduce((a, b) => a + b, 0), 10 + 10 + 5 + 4);
    await store.deleteUpload(u);
    assert.deepEqual(await names(store.listUploads()), []);
  });

  test("uploads spanning several parts: chunks of any size, resumed at any offset, committed whole", async ({ store, partSize }) => {
    // Over two parts of a part-cutting store, and not a multiple of its part size.
    const P = partSize || (5 << 20);
    const data = pattern(2 * P + 1_234_567, 7);
    const u = crypto.randomUUID();
    const opts = { maxBytes: Number.MAX_SAFE_INTEGER, onChunk: () => {} };
    // PATCH boundaries: a small first chunk, one ending just before a part boundary, one just
    // after, and the rest in odd-sized pieces.
    const cuts = [1000, P - 1, P + 1, data.length];
    let offset = 0;
    for (const end of cuts) {
      const r = await store.appendUpload(
        u,
        offset,
        chunked(data.subarray(offset, end), [65_536, 1, 300_001]),
        opts,
      );
      assert.deepEqual(r, { written: end - offset, cut: false });
      offset = end;
    }
    assert.deepEqual(await collect(await store.readUpload(u, data.length)), data);
    assert.deepEqual(await collect(await store.readUpload(u, P + 10)), data.subarray(0, P + 10));
    // A reader tailing the upload sees the bytes at any position.
    const reader = await store.openUpload(u);
    const buf = new Uint8Array(100);
    for (const pos of [0, P - 50, P, 2 * P + 1_234_500]) {
      let got = 0;
      while (got < 100 && pos + got < data.length) {
        const n = await reader.readAt(pos + got, buf.subarray(got));
        assert.ok(n > 0, `no bytes at ${pos + got}`);
        got += n;
      }
      assert.deepEqual(buf.subarray(0, got), data.subarray(pos, pos + got));
    }
    assert.equal(await reader.readAt(data.length, buf), 0);
    reader.close();
    const uploads = [];
    for await (const o of store.listUploads()) uploads.push(o);
    assert.deepEqual(uploads.map((o) => o.name), [u]);
    assert.ok(uploads[0].size >= data.length);
    const d = `sha256:${await sha256Hex(data)}`;
    await store.commitUpload(u, d, data.length);
    assert.deepEqual(await collect(await store.read(d)), data);
    assert.deepEqual(
      await collect(await store.read(d, { start: P - 3, end: P + 3 })),
      data.subarray(P - 3, P + 4),
    );
    await store.deleteUpload(u);
    assert.deepEqual(await names(store.listUploads()), []);
  });

  test("commitUpload keeps only the committed prefix of an upload written past it", async ({ store }) => {
    const u = crypto.randomUUID();
    const opts = { maxBytes: 1 << 20, onChunk: () => {} };
    const data = pattern(50_000);
    await store.appendUpload(u, 0, ReadableStream.from([data]), opts);
    const d = `sha256:${await sha256Hex(data.subarray(0, 40_000))}`;
    await store.commitUpload(u, d, 40_000);
    await store.deleteUpload(u);
    assert.deepEqual(await store.readAll(d), data.subarray(0, 40_000));
    // The empty blob too.
    const e = crypto.randomUUID();
    await store.appendUpload(e, 0, ReadableStream.from([]), opts);
    const empty = `sha256:${await sha256Hex(new Uint8Array(0))}`;
    await store.commitUpload(e, empty, 0);
    await store.deleteUpload(e);
    assert.deepEqual(await store.readAll(empty), new Uint8Array(0));
  });

  test("commitUpload({synced}) after one append from 0 stores exactly those bytes (empty too); a second append from 0 replaces the first", async ({ store }) => {
    const opts = { maxBytes: 1 << 20, onChunk: () => {} };
    const u = crypto.randomUUID();
    // an earlier, longer attempt under the same name is replaced by an append from offset 0
    await store.appendUpload(u, 0, ReadableStream.from([pattern(90_000)]), opts);
    const data = pattern(70_001).map((b) => b ^ 0x5a);
    const r = await store.appendUpload(u, 0, ReadableStream.from([data]), opts);
    assert.equal(r.written, data.length);
    const d = `sha256:${await sha256Hex(data)}`;
    await store.commitUpload(u, d, data.length, { synced: true });
    await store.deleteUpload(u);
    assert.deepEqual(await store.readAll(d), data);
    // read with the size the metadata knows, whole and a range
    assert.deepEqual(await collect(await store.read(d, undefined, data.length)), data);
    assert.deepEqual(
      await collect(await store.read(d, { start: 5, end: 9 }, data.length)),
      data.subarray(5, 10),
    );
    const e = crypto.randomUUID();
    await store.appendUpload(e, 0, ReadableStream.from([]), opts);
    const empty = `sha256:${await sha256Hex(new Uint8Array(0))}`;
    await store.commitUpload(e, empty, 0, { synced: true });
    await store.deleteUpload(e);
    assert.deepEqual(await store.readAll(empty), new Uint8Array(0));
  });

  test("appendUpload past maxBytes keeps what fits and throws TooLargeError", async ({ store }) => {
    const u = crypto.randomUUID();
    await assert.rejects(
      store.appendUpload(u, 0, ReadableStream.from([pattern(700), pattern(700)]), {
        maxBytes: 1000,
        onChunk: () => {},
      }),
      TooLargeError,
    );
    assert.deepEqual(
      await collect(await store.readUpload(u, 1000)),
      new Uint8Array([...pattern(700), ...pattern(700).subarray(0, 300)]),
    );
    await store.deleteUpload(u);
  });

  test("derived files: written whole, read whole or ranged, deleted by prefix, names confined", async ({ store, partSize }) => {
    for (const size of [100_000, partSize > 0 ? partSize + 100 : 0]) {
      if (size === 0) continue;
      const data = pattern(size, 13);
      const n = await store.writeDerived(
        "index/sha256/ab/run1/listing.ndjson",
        ReadableStream.from([data.subarray(0, 30_000), data.subarray(30_000)]),
      );
      assert.equal(n, data.length);
      assert.deepEqual(
        await collect(await store.readDerived("index/sha256/ab/run1/listing.ndjson")),
        data,
      );
      assert.deepEqual(
        await collect(
          await store.readDerived("index/sha256/ab/run1/listing.ndjson", {
            start: size - 10,
            end: size - 1,
          }),
        ),
        data.subarray(size - 10),
      );
    }
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
  });

  test("quarantine: the blob leaves read, exists and listBlobs, is kept aside, and stores afresh", async ({ store }) => {
    const data = pattern(100_000);
    const d = `sha256:${await sha256Hex(data)}`;
    await assert.rejects(store.quarantine(d), Deno.errors.NotFound);
    // Rotten bytes under the digest, as a disk that flipped bits would hold them.
    const rotten = data.slice();
    rotten[50_000] ^= 0xff;
    await store.put(d, rotten);
    assert.deepEqual(await store.readAll(d), rotten, "a store hands back what it holds");
    await assert.rejects(readVerified(store, d), (e: unknown) => {
      assert.ok(e instanceof CorruptBlobError);
      assert.equal(e.status, 500);
      assert.match(e.detail, new RegExp(`${d} do not match its digest \\(they hash to sha256:`));
      return true;
    });
    assert.equal(await store.quarantine(d), true);
    assert.equal(await store.exists(d), false);
    await assert.rejects(async () => await collect(await store.read(d)), Deno.errors.NotFound);
    await assert.rejects(store.readAll(d), Deno.errors.NotFound);
    assert.deepEqual(await names(store.listBlobs()), []);
    const kept = await Array.fromAsync(store.listQuarantined());
    assert.deepEqual(kept.map((q) => [q.name, q.size]), [[d, rotten.length]]);
    // A re-push (or a refetch) of the digest commits its bytes: a store that skips writing bytes
    // it already holds must not take the quarantined ones for them.
    const u = crypto.randomUUID();
    const opts = { maxBytes: data.length, onChunk: () => {} };
    await store.appendUpload(u, 0, ReadableStream.from([data]), opts);
    await store.commitUpload(u, d, data.length, { synced: true });
    assert.deepEqual(await readVerified(store, d), data);
    assert.deepEqual(await names(store.listBlobs()), [d]);
    await store.deleteQuarantined(d);
    await store.deleteQuarantined(d); // absent: no error
    assert.deepEqual(await Array.fromAsync(store.listQuarantined()), []);
    assert.deepEqual(await readVerified(store, d), data, "the blob itself stays");
  });
}
