import assert from "node:assert/strict";
import { gunzipSync } from "node:zlib";
import { FsBlobStore } from "../storage/fs_blob_store.ts";
import { files, type IndexRecord } from "./layer_store.ts";
import { joinNdjson, listingDocument, ListingWriter } from "./listing_document.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

async function text(body: ReadableStream<Uint8Array>): Promise<string> {
  return await new Response(body).text();
}

function chunked(bytes: Uint8Array, size: number): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(c) {
      for (let i = 0; i < bytes.length; i += size) c.enqueue(bytes.slice(i, i + size));
      c.close();
    },
  });
}

const entries = [
  { path: "etc", kind: "dir" },
  { path: 'we}ird {"[path]"}\\\n,', kind: "file", content: { mime_type: "text/plain" } },
  { path: "usr/bin/ünï", kind: "file", capabilities: ["cap_net_raw"] },
  ...Array.from({ length: 40 }, (_, i) => ({ path: `d/f${i}`, kind: "file" })),
];

Deno.test("listing document: NDJSON joined into the document equals JSON.parse, however it is cut", async () => {
  // blank lines (including a leading one and a doubled one) are dropped
  const ndjson = enc.encode(
    "\n" + entries.map((e) => JSON.stringify(e)).join("\n").replace("\n", "\n\n") + "\n",
  );
  const tail = {
    refreshing: true,
    compression: "gzip" as const,
    uncompressedSize: 51200,
    state: "partial" as const,
    error: 'cut "short" ]}',
  };
  for (const size of [1, 2, 3, 7, 64, 1000, ndjson.length]) {
    const doc = JSON.parse(await text(joinNdjson(chunked(ndjson, size), tail)));
    assert.deepEqual(doc, {
      entries,
      refreshing: true,
      compressed: true,
      uncompressed_size: 51200,
      partial: true,
      error: 'cut "short" ]}',
    }, `chunks of ${size}`);
  }
  const empty = JSON.parse(
    await text(joinNdjson(chunked(new Uint8Array(0), 1), { ...tail, state: "ready" })),
  );
  assert.deepEqual(empty, {
    entries: [],
    refreshing: true,
    compressed: true,
    uncompressed_size: 51200,
  });
});

Deno.test("listing document: the stored gzip document, the identity answer and the refreshing rebuild agree", async () => {
  const root = await Deno.makeTempDir();
  try {
    const store = new FsBlobStore(root);
    await store.init();
    const base = "index/sha256/ab/a";
    const w = new ListingWriter(store, base);
    await w.write(entries.slice(0, 3).map((e) => JSON.stringify(e)));
    await w.write([]);
    await w.write(entries.slice(3).map((e) => JSON.stringify(e)));
    const documentSize = await w.close({
      compression: "none",
      uncompressedSize: 9000,
      state: "ready",
    });
    const rec: IndexRecord = {
      version: 1,
      state: "ready",
      compression: "none",
      uncompressedSize: 9000,
      entries: entries.length,
      indexedAt: 0,
      documentSize,
      base,
    };
    const want = { entries, refreshing: false, compressed: false, uncompressed_size: 9000 };

    const gz = await listingDocument(store, rec, false, true);
    assert.equal(gz.gzipped, true);
    const gzBytes = new Uint8Array(await new Response(gz.body).arrayBuffer());
    assert.equal(gz.length, gzBytes.length, "Content-Length is the stored size");
    assert.deepEqual(JSON.parse(dec.decode(gunzipSync(gzBytes))), want);

    const plain = await listingDocument(store, rec, false, false);
    assert.equal(plain.gzipped, false);
    assert.deepEqual(JSON.parse(await text(plain.body)), want);

    // A refreshing answer cannot come from the stored document (it says refreshing: false).
    const refreshing = await listingDocument(store, rec, true, true);
    assert.equal(refreshing.gzipped, true);
    assert.equal(refreshing.length, undefined);
    const r = new Uint8Array(await new Response(refreshing.body).arrayBuffer());
    assert.deepEqual(JSON.parse(dec.decode(gunzipSync(r))), { ...want, refreshing: true });

    // A record from before the document existed is served from the NDJSON.
    const old = { ...rec, documentSize: undefined };
    await store.deleteDerived(files.listingDocument(base));
    const fromNdjson = await listingDocument(store, old, false, false);
    assert.deepEqual(JSON.parse(await text(fromNdjson.body)), want);
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("listing document: a store that cannot write ends the writes instead of hanging them", async () => {
  const root = await Deno.makeTempDir();
  try {
    // no init(): the store has no uploads directory, so both files fail before reading a byte
    const w = new ListingWriter(new FsBlobStore(root), "index/sha256/ef/a");
    await assert.rejects(async () => {
      for (let i = 0; i < 100; i++) await w.write([JSON.stringify(entries[0])]);
      await w.close({ compression: "none", uncompressedSize: 0, state: "ready" });
    });
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("listing document: an aborted writer leaves no document behind", async () => {
  const root = await Deno.makeTempDir();
  try {
    const store = new FsBlobStore(root);
    await store.init();
    const w = new ListingWriter(store, "index/sha256/cd/b");
    await w.write([JSON.stringify(entries[0])]);
    await w.abort(new Error("walk failed"));
    await assert.rejects(store.readDerived(files.listingDocument("index/sha256/cd/b")).then(text));
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
