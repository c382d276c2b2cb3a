import assert from "node:assert/strict";
import { join } from "node:path";
import { openTestKv } from "../../tests/helpers/kv.ts";
import { BlobMeta } from "../metadata/mod.ts";
import { RegistryError } from "../oci/errors.ts";
import { FsBlobStore } from "../storage/mod.ts";
import { digestBytes } from "../streams/hasher.ts";
import { concatBytes } from "../streams/mod.ts";
import { BlobFill, FILL_MEMORY_BOUND, FillError, Fills, type FillSource } from "./blob_fill.ts";

async function withFills(
  fn: (fills: Fills, store: FsBlobStore, blobs: BlobMeta, dir: string) => Promise<void>,
) {
  const dir = await Deno.makeTempDir({ prefix: "wharf-fill-" });
  const t = await openTestKv();
  const store = new FsBlobStore(join(dir, "blobs"));
  await store.init();
  const blobs = new BlobMeta(t.kv);
  try {
    await fn(new Fills({ store, blobs, maxBlobSize: null }), store, blobs, dir);
    assert.deepEqual(t.violations, []);
  } finally {
    await t.close();
    await Deno.remove(dir, { recursive: true });
  }
}

/** A source that hands out `data` in `chunk`-sized pieces, each after `gate()` resolves. */
function source(
  data: Uint8Array,
  opts: { chunk?: number; gate?: () => Promise<void>; size?: number | null } = {},
): FillSource {
  const chunk = opts.chunk ?? 100_000;
  let off = 0;
  const body = new ReadableStream<Uint8Array>({
    async pull(ctl) {
      await opts.gate?.();
      if (off >= data.byteLength) return ctl.close();
      ctl.enqueue(data.slice(off, off + chunk));
      off += chunk;
    },
  });
  return { body, size: opts.size === undefined ? data.byteLength : opts.size };
}

function random(n: number): Uint8Array {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i += 65536) crypto.getRandomValues(b.subarray(i, Math.min(n, i + 65536)));
  return b;
}

const bytes = (s: ReadableStream<Uint8Array>) =>
  new Response(s).arrayBuffer().then((b) => new Uint8Array(b));

async function uploadFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for await (const e of Deno.readDir(join(dir, "blobs", "uploads"))) out.push(e.name);
  return out;
}

Deno.test("one fill, many followers: each gets every byte while the upstream is still sending", async () => {
  await withFills(async (fills, store, blobs, dir) => {
    const data = random(3_000_000);
    const digest = digestBytes("sha256", data);
    let release!: () => void;
    let gateOpen = new Promise<void>((r) => (release = r));
    let sent = 0;
    let opened = 0;
    const open = () => {
      opened++;
      return Promise.resolve(source(data, {
        gate: async () => {
          if (sent++ >= 5) await gateOpen; // hold the upstream after 5 chunks
        },
      }));
    };
    const first = await fills.begin("ns/a", digest, open);
    const followers = await Promise.all(
      Array.from({ length: 5 }, () => fills.begin("ns/a", digest, open).then((f) => f.follow())),
    );
    // The first bytes reach a follower before the upstream has finished.
    const reader = followers[0].getReader();
    const head = await reader.read();
    assert.ok(!head.done && head.value.byteLength > 0);
    assert.equal(first.state, "running");
    release();
    gateOpen = Promise.resolve();
    const rest = await bytes(
      new ReadableStream({
        async pull(ctl) {
          const r = await reader.read();
          if (r.done) ctl.close();
          else ctl.enqueue(r.value);
        },
      }),
    );
    const all = new Uint8Array(head.value.byteLength + rest.byteLength);
    all.set(head.value);
    all.set(rest, head.value.byteLength);
    assert.deepEqual(all, data);
    for (const f of followers.slice(1)) assert.deepEqual(await bytes(f), data);
    await first.settled;
    assert.equal(opened, 1, "the upstream was asked once");
    assert.equal(first.state, "done");
    assert.ok(await blobs.link("ns/a", digest), "linked to the namespace");
    assert.deepEqual(await store.readAll(digest), data);
    assert.deepEqual(await uploadFiles(dir), [], "no upload file left");
    // A follower arriving after the fill reads the stored blob, ranges included.
    assert.deepEqual(await bytes(await first.follow(10, 19)), data.subarray(10, 20));
  });
});

Deno.test("a follower's range is served from the growing file", async () => {
  await withFills(async (fills) => {
    const data = random(1_000_000);
    const fill = await fills.begin(
      "ns/r",
      digestBytes("sha256", data),
      () => Promise.resolve(source(data, { chunk: 4096 })),
    );
    assert.deepEqual(
      await bytes(await fill.follow(500_000, 500_099)),
      data.subarray(500_000, 500_100),
    );
    assert.deepEqual(await bytes(await fill.follow(999_990)), data.subarray(999_990));
    await fill.settled;
  });
});

Deno.test("bytes that do not hash to the digest are never stored, and followers fail", async () => {
  await withFills(async (fills, store, blobs, dir) => {
    const data = random(500_000);
    const wrong = digestBytes("sha256", new TextEncoder().encode("something else"));
    const fill = await fills.begin("ns/p", wrong, () => Promise.resolve(source(data)));
    const f = await fill.follow();
    await assert.rejects(bytes(f));
    await assert.rejects(fill.settled, (e) => e instanceof FillError && e.permanent);
    assert.equal(await store.exists(wrong), false);
    assert.equal(await blobs.link("ns/p", wrong), null);
    assert.equal(await blobs.blob(wrong), null, "no blob record either");
    assert.deepEqual(await uploadFiles(dir), []);
    assert.equal(fills.get(wrong), undefined, "a failed fill leaves the table");
  });
});

Deno.test("a short, an overlong and an oversized upstream body fail the fill", async () => {
  await withFills(async (fills, store) => {
    const data = random(200_000);
    const digest = digestBytes("sha256", data);
    const short = await fills.begin(
      "ns/s",
      digest,
      () => Promise.resolve(source(data.subarray(0, 100_000), { size: 200_000 })),
    );
    await assert.rejects(short.settled, (e) => e instanceof FillError && !e.permanent);
    const long = await fills.begin(
      "ns/s",
      digest,
      () => Promise.resolve(source(data, { size: 150_000 })),
    );
    await assert.rejects(long.settled, (e) => e instanceof FillError && e.permanent);
    assert.equal(await store.exists(digest), false);
    // Without a declared length the bytes decide.
    const chunked = await fills.begin(
      "ns/s",
      digest,
      () => Promise.resolve(source(data, { size: null })),
    );
    await chunked.settled;
    assert.equal(chunked.size, 200_000);
  });
  const dir = await Deno.makeTempDir();
  const t = await openTestKv();
  try {
    const store = new FsBlobStore(dir);
    await store.init();
    const fills = new Fills({ store, blobs: new BlobMeta(t.kv), maxBlobSize: 1000 });
    const data = random(5000);
    const fill = await fills.begin(
      "ns/m",
      digestBytes("sha256", data),
      () => Promise.resolve(source(data)),
    );
    await assert.rejects(fill.settled, /exceeds max_blob_size/);
  } finally {
    await t.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("an upstream that fails to answer is shared by the callers waiting on it, then retried", async () => {
  await withFills(async (fills) => {
    const data = random(10);
    const digest = digestBytes("sha256", data);
    let calls = 0;
    const failing = () => {
      calls++;
      return new Promise<FillSource>((_, rej) => setTimeout(() => rej(new Error("down")), 20));
    };
    const results = await Promise.allSettled(
      [1, 2, 3].map(() => fills.begin("ns/f", digest, failing)),
    );
    assert.ok(results.every((r) => r.status === "rejected"));
    assert.equal(calls, 1);
    const fill = await fills.begin("ns/f", digest, () => Promise.resolve(source(data)));
    await fill.settled;
    assert.equal(fill.state, "done");
    assert.ok(fill instanceof BlobFill);
  });
});

/** A store whose upload writes take `delayMs` each: a disk slower than the upstream. */
function slowWrites(store: FsBlobStore, delayMs: number): FsBlobStore {
  return new Proxy(store, {
    get(target, prop, receiver) {
      if (prop !== "appendUpload") {
        // The store keeps its parts in private fields: its methods run on the store itself.
        const v = Reflect.get(target, prop, receiver);
        return typeof v === "function" ? v.bind(target) : v;
      }
      return (
        uuid: string,
        offset: number,
        body: ReadableStream<Uint8Array> | null,
        opts: Parameters<FsBlobStore["appendUpload"]>[3],
      ) =>
        target.appendUpload(
          uuid,
          offset,
          body?.pipeThrough(
            new TransformStream(
              {
                async transform(c, ctl) {
                  const copy = c.slice(); // the fill lends each chunk only until the next pull
                  await new Promise((r) => setTimeout(r, delayMs));
                  ctl.enqueue(copy);
                },
              },
            ),
          ) ?? null,
          opts,
        );
    },
  });
}

Deno.test("a disk slower than the upstream holds the upstream back: memory stays bounded", async () => {
  await withFills(async (_fills, store, blobs) => {
    const fills = new Fills({ store: slowWrites(store, 2), blobs, maxBlobSize: null });
    const data = random(40 << 20);
    const digest = digestBytes("sha256", data);
    const fill = await fills.begin(
      "ns/slow",
      digest,
      () => Promise.resolve(source(data, { chunk: 64 * 1024 })),
    );
    let peak = 0;
    const sample = setInterval(() => (peak = Math.max(peak, fill.inMemory)), 1);
    try {
      assert.deepEqual(await bytes(await fill.follow()), data);
      await fill.settled;
    } finally {
      clearInterval(sample);
    }
    assert.ok(peak > 0, "the follower was served from memory");
    assert.ok(
      peak <= FILL_MEMORY_BOUND + 2 * 64 * 1024,
      `held ${peak} bytes, bound ${FILL_MEMORY_BOUND}`,
    );
    assert.equal(fill.inMemory, 0, "nothing held once stored");
    assert.deepEqual(await store.readAll(digest), data);
  });
});

Deno.test("followers at every pace and range, some far behind the memory window, all get exact bytes", async () => {
  await withFills(async (fills, store) => {
    for (let round = 0; round < 3; round++) {
      const data = random(12 << 20);
      const digest = digestBytes("sha256", data);
      // Uneven chunk sizes, with pauses, the way a network delivers them.
      let off = 0;
      const body = new ReadableStream<Uint8Array>({
        async pull(ctl) {
          if (off >= data.byteLength) return ctl.close();
          const n = 1 + Math.floor(Math.random() * 200_000);
          ctl.enqueue(data.slice(off, off + n));
          off += n;
          if (Math.random() < 0.05) await new Promise((r) => setTimeout(r, 3));
        },
      });
      const fill = await fills.begin(
        `ns/pace${round}`,
        digest,
        () => Promise.resolve({ body, size: data.byteLength }),
      );
      const readers = Array.from({ length: 12 }, async (_, i) => {
        const start = i % 3 === 0 ? 0 : Math.floor(Math.random() * data.byteLength);
        const end = i % 4 === 0 ? null : Math.min(
          data.byteLength - 1,
          start + Math.floor(Math.random() * (4 << 20)),
        );
        // Some start late, some read slowly: they fall behind the window onto the file.
        if (i % 2 === 1) await new Promise((r) => setTimeout(r, Math.random() * 40));
        const s = await fill.follow(start, end);
        const got: Uint8Array[] = [];
        let n = 0;
        for await (const c of s) {
          got.push(c.slice()); // chunks are only lent
          n += c.byteLength;
          if (i % 3 === 2) await new Promise((r) => setTimeout(r, 1));
        }
        const all = new Uint8Array(n);
        let at = 0;
        for (const c of got) {
          all.set(c, at);
          at += c.byteLength;
        }
        assert.deepEqual(
          all,
          data.subarray(start, end === null ? data.byteLength : end + 1),
          `follower ${i} [${start}, ${end}]`,
        );
      });
      await Promise.all(readers);
      await fill.settled;
      assert.deepEqual(await store.readAll(digest), data);
    }
  });
});

Deno.test("a follower's stream never ends cleanly before the bytes hashed to the digest", async () => {
  await withFills(async (fills) => {
    const data = random(3 << 20);
    const wrong = digestBytes("sha256", data.subarray(1));
    // The upstream sends every byte of the declared length, then pauses before it ends.
    let off = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(ctl) {
        if (off >= data.byteLength) {
          await new Promise((r) => setTimeout(r, 100));
          return ctl.close();
        }
        ctl.enqueue(data.slice(off, off + 65536));
        off += 65536;
      },
    });
    const fill = await fills.begin(
      "ns/v",
      wrong,
      () => Promise.resolve({ body, size: data.byteLength }),
    );
    await assert.rejects(
      bytes(await fill.follow()),
      (e) => e instanceof RegistryError && /hash to/.test(e.detail),
    );
    await assert.rejects(bytes(await fill.follow(0, 99)).then(() => fill.settled));
  });
});

/** A store whose upload writes fail, as a full disk's do, once `room` bytes went in. */
class FullAfter extends FsBlobStore {
  constructor(root: string, private room: number) {
    super(root);
  }
  override appendUpload(...a: Parameters<FsBlobStore["appendUpload"]>) {
    const [uuid, offset, body, opts] = a;
    let left = this.room;
    return super.appendUpload(uuid, offset, body, {
      ...opts,
      onChunk: (c) => {
        // Thrown where the write is reported: the append fails as a failed write fails it.
        if (c.byteLength > left) throw new Error("No space left on device (os error 28)");
        left -= c.byteLength;
        opts.onChunk?.(c);
      },
    });
  }
}

async function withFullStore(
  room: number,
  lagGraceMs: number,
  fn: (fills: Fills, store: FsBlobStore, blobs: BlobMeta, dir: string) => Promise<void>,
) {
  const dir = await Deno.makeTempDir({ prefix: "wharf-fill-full-" });
  const t = await openTestKv();
  const store = new FullAfter(join(dir, "blobs"), room);
  await store.init();
  const blobs = new BlobMeta(t.kv);
  try {
    await fn(new Fills({ store, blobs, maxBlobSize: null, lagGraceMs }), store, blobs, dir);
    assert.deepEqual(t.violations, []);
  } finally {
    await t.close();
    await Deno.remove(dir, { recursive: true });
  }
}

/** Reads `s` whole, calling `each` with the bytes so far after every chunk. */
async function readAll(
  s: ReadableStream<Uint8Array>,
  each?: (n: number) => Promise<void> | void,
): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  let n = 0;
  for await (const c of s) {
    parts.push(c.slice());
    n += c.byteLength;
    await each?.(n);
  }
  return concatBytes(parts, n);
}

/**
 * A fill of `size` random bytes in `ns` from an upstream slower than the clients (a chunk every
 * `gateMs`, as over a WAN link): its followers keep to its front.
 */
async function slowFill(fills: Fills, ns: string, size: number, gateMs: number) {
  const data = random(size);
  const digest = digestBytes("sha256", data);
  const slow = source(data, { gate: () => new Promise((r) => setTimeout(r, gateMs)) });
  const fill = await fills.begin(ns, digest, () => Promise.resolve(slow));
  return { data, digest, fill };
}

Deno.test("the store refusing a fill's bytes midway: its followers still get every byte, verified, and nothing is stored", async () => {
  await withFullStore(6_000_000, 10_000, async (fills, store, blobs, dir) => {
    const { data, digest, fill } = await slowFill(fills, "ns/full", 12_000_000, 3);
    const followers = await Promise.all([fill.follow(), fill.follow()]);
    // Asks from the start but reads nothing before the store refuses: the bytes it had yet to
    // read were in the file, which the failed append emptied.
    const idle = (await fill.follow()).getReader();
    let peak = 0;
    const got = await Promise.all(
      followers.map((f) => readAll(f, () => void (peak = Math.max(peak, fill.inMemory)))),
    );
    for (const g of got) assert.deepEqual(g, data);
    await assert.rejects(fill.settled, /No space left on device/);
    await assert.rejects(async () => void (await idle.read()), (e: RegistryError) => {
      assert.match(
        e.detail,
        /^the blob store refused the fill of sha256:[0-9a-f]{64} \(No space left on device.*dropped the bytes this client had yet to read$/,
      );
      return true;
    });
    assert.equal(fills.get(digest), undefined, "a new client does not join an uncached fill");
    assert.ok(peak <= FILL_MEMORY_BOUND + 200_000, `held ${peak} bytes`);
    assert.equal(await store.exists(digest), false);
    assert.equal(await blobs.link("ns/full", digest), null);
    for (let i = 0; i < 50 && (await uploadFiles(dir)).length > 0; i++) {
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.deepEqual(await uploadFiles(dir), [], "the upload file goes once they finished");
  });
});

Deno.test("an uncached fill cuts off a follower that stopped reading; the others go on", async () => {
  await withFullStore(1_000_000, 300, async (fills) => {
    const { data, fill } = await slowFill(fills, "ns/stall", 12_000_000, 1);
    const reading = await fill.follow();
    const stalled = (await fill.follow()).getReader();
    const first = await stalled.read(); // one chunk, then nothing
    assert.ok(!first.done);
    assert.deepEqual(await readAll(reading), data);
    await assert.rejects(async () => {
      for (;;) if ((await stalled.read()).done) break;
    }, (e: RegistryError) => {
      assert.match(
        e.detail,
        /^stopped reading for 300 ms while the uncached fill of sha256:[0-9a-f]{64} waited on it$/,
      );
      return true;
    });
    await assert.rejects(fill.settled, /No space left on device/);
  });
});

Deno.test("a fill nobody follows fails when the store refuses its bytes", async () => {
  await withFullStore(1_000_000, 10_000, async (fills, store, _blobs, dir) => {
    const data = random(3_000_000);
    const digest = digestBytes("sha256", data);
    const fill = await fills.begin("ns/job", digest, () => Promise.resolve(source(data)));
    await assert.rejects(fill.settled, /No space left on device/);
    assert.equal(fill.state, "failed");
    assert.equal(await store.exists(digest), false);
    assert.deepEqual(await uploadFiles(dir), []);
  });
});

Deno.test("an uncached fill whose bytes all arrived lets go of a follower that stopped reading", async () => {
  await withFullStore(500_000, 300, async (fills, _store, _blobs, dir) => {
    const { data, fill } = await slowFill(fills, "ns/end", 3_000_000, 1);
    const reading = await fill.follow();
    const stalled = (await fill.follow()).getReader();
    assert.ok(!(await stalled.read()).done);
    assert.deepEqual(await readAll(reading), data);
    // Within MAX_UNWRITTEN of the end it held nobody up; the bytes kept for it go all the same.
    for (let i = 0; i < 100 && fill.inMemory > 0; i++) await new Promise((r) => setTimeout(r, 20));
    assert.equal(fill.inMemory, 0);
    assert.deepEqual(await uploadFiles(dir), []);
    await assert.rejects(async () => {
      for (;;) if ((await stalled.read()).done) break;
    }, (e: RegistryError) => /^stopped reading for 300 ms/.test(e.detail));
  });
});
