// Property and mutation fuzzing of the tar walker: it reads layers pushed by anyone.
import assert from "node:assert/strict";
import { type TarEntry, TarError, walkTar } from "./tar.ts";
import { tarHeader, tarOf } from "../../tests/helpers/tar.ts";
import { expectOnly, FAST_MS, fc, fuzzParams, mutated, within } from "../../tests/helpers/fuzz.ts";
import { concat } from "../../tests/helpers/bytes.ts";

const enc = new TextEncoder();

const padded = (b: Uint8Array) => concat(b, new Uint8Array((512 - b.length % 512) % 512));

/** A PAX record with its self-counting length. */
function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  const n = enc.encode(body).length;
  let len = n + String(n).length;
  if (String(len).length !== String(n + String(len).length).length) len++;
  len = n + String(len).length;
  return `${len}${body}`;
}

function paxHeader(records: [string, string][], type = "x"): Uint8Array {
  const body = enc.encode(records.map(([k, v]) => paxRecord(k, v)).join(""));
  return concat(tarHeader("PaxHeaders/x", body.length, type), padded(body));
}

function gnuLongName(name: string, type = "L"): Uint8Array {
  const body = enc.encode(name + "\0");
  return concat(tarHeader("././@LongLink", body.length, type), padded(body));
}

/** An old-GNU sparse header ("S") with `segments` in the header and extension blocks. */
function gnuSparse(name: string, realSize: number, segments: [number, number][]): Uint8Array {
  const stored = segments.reduce((n, [, len]) => n + len, 0);
  const h = tarHeader(name, stored, "S");
  h.set(enc.encode("ustar  \0"), 257);
  const oct = (b: Uint8Array, off: number, len: number, v: number) =>
    b.set(enc.encode(v.toString(8).padStart(len - 1, "0") + "\0"), off);
  const blocks: Uint8Array[] = [];
  segments.slice(0, 4).forEach(([o, l], i) => {
    oct(h, 386 + i * 24, 12, o);
    oct(h, 398 + i * 24, 12, l);
  });
  oct(h, 483, 12, realSize);
  let rest = segments.slice(4);
  h[482] = rest.length ? 1 : 0;
  while (rest.length) {
    const b = new Uint8Array(512);
    rest.slice(0, 21).forEach(([o, l], i) => {
      oct(b, i * 24, 12, o);
      oct(b, i * 24 + 12, 12, l);
    });
    rest = rest.slice(21);
    b[504] = rest.length ? 1 : 0;
    blocks.push(b);
  }
  let sum = 0;
  h.fill(0x20, 148, 156);
  for (const x of h) sum += x;
  h.set(enc.encode(sum.toString(8).padStart(6, "0") + "\0 "), 148);
  return concat(h, ...blocks, padded(new Uint8Array(stored).fill(0x61)));
}

/** Valid archives of every header form the walker reads, built here byte by byte. */
const SAMPLES: Record<string, Uint8Array> = {
  ustar: tarOf([
    { path: "etc/", type: "5" },
    { path: "etc/passwd", data: "root:x:0:0::/root:/bin/sh\n" },
    { path: "bin/sh", type: "2", link: "busybox" },
    { path: "bin/ash", type: "1", link: "bin/busybox" },
    { path: "var/.wh.cache", data: "" },
    { path: "opt/.wh..wh..opq", data: "" },
  ]),
  pax: concat(
    paxHeader([["path", "p/" + "long/".repeat(40) + "ünïcode"], ["size", "5"], ["mtime", "1.5"]]),
    tarHeader("short", 5),
    padded(enc.encode("hello")),
    paxHeader([["comment", "global"]], "g"),
    paxHeader([["SCHILY.xattr.security.capability", "\x01\x00\x00\x02\x00\x04\x00\x00\0\0\0\0"]]),
    tarHeader("usr/bin/ping", 0),
    new Uint8Array(1024),
  ),
  gnuLong: concat(
    gnuLongName("g/" + "x".repeat(300)),
    gnuLongName("t/" + "y".repeat(200), "K"),
    tarHeader("ignored", 0, "2", 0o777, "ignored"),
    gnuLongName("f/" + "z".repeat(150)),
    tarHeader("f", 3),
    padded(enc.encode("abc")),
    new Uint8Array(1024),
  ),
  gnuSparse: concat(
    gnuSparse("sparse", 1 << 30, Array.from({ length: 30 }, (_, i) => [i * 8192, 512])),
    tarOf([{ path: "after", data: "after" }]),
  ),
  paxSparse: concat(
    paxHeader([
      ["GNU.sparse.major", "1"],
      ["GNU.sparse.minor", "0"],
      ["GNU.sparse.name", "real/name"],
      ["GNU.sparse.realsize", "1048576"],
    ]),
    tarHeader("GNUSparseFile.1/name", 1024),
    padded(enc.encode("1\n0\n512\n")),
    new Uint8Array(512),
    tarOf([{ path: "after", data: "x" }]),
  ),
};

/** A stream of `bytes` cut at `cuts` (fractions of the length). */
function streamOf(bytes: Uint8Array, cuts: number[] = []): ReadableStream<Uint8Array> {
  const at = [...new Set(cuts.map((c) => Math.floor(c * bytes.length)))].sort((a, b) => a - b);
  const parts: Uint8Array[] = [];
  let prev = 0;
  for (const a of [...at, bytes.length]) {
    parts.push(bytes.slice(prev, a));
    prev = a;
  }
  return ReadableStream.from(parts);
}

interface Walked {
  entries: TarEntry[];
  data: Map<number, number>;
  error: TarError | null;
}

async function walk(bytes: Uint8Array, cuts: number[] = []): Promise<Walked> {
  const entries: TarEntry[] = [];
  const data = new Map<number, number>();
  let error: TarError | null = null;
  try {
    for await (
      const e of walkTar(streamOf(bytes, cuts), {
        maxEntries: 10_000,
        onData: (e, c) => data.set(e.offset, (data.get(e.offset) ?? 0) + c.length),
      })
    ) entries.push(e);
  } catch (e) {
    expectOnly(e, TarError);
    error = e as TarError;
  }
  return { entries, data, error };
}

/** What the walker may promise about any input, valid or not. */
function checkBounds(bytes: Uint8Array, w: Walked): void {
  // every entry has a header block of its own
  assert.ok(w.entries.length <= Math.ceil(bytes.length / 512));
  for (const e of w.entries) {
    assert.ok(Number.isSafeInteger(e.size) && e.size >= 0, `size ${e.size}`);
    assert.ok(e.offset >= 512 && e.offset <= bytes.length, `offset ${e.offset}`);
    if (e.kind === "file") assert.ok(e.offset + e.size <= bytes.length);
    assert.ok(e.path.length <= 1024 * 1024);
  }
  for (const [off, n] of w.data) {
    const e = w.entries.find((x) => x.offset === off);
    if (e) assert.equal(n, e.size, `data passed for ${e.path}`);
  }
}

// --- regressions: inputs that made a property fail ---------------------------------------

/**
 * An old-GNU sparse file with more than 4 segments: its extension block was taken for data,
 * the walk lost its place and, meeting zeros, ended as if at the end of the archive, so the
 * entries after it ("after") were silently dropped.
 */
const REGRESSION_GNU_SPARSE_EXTENDED = SAMPLES.gnuSparse;

/**
 * A PAX 1.0 sparse file was listed as `GNUSparseFile.1/name`, a regular file whose size and
 * data were the packed segments with the map in front, not the file.
 */
const REGRESSION_PAX_SPARSE_NAME = SAMPLES.paxSparse;

/**
 * A 1 MiB PAX record arriving in 64-byte chunks: every chunk was joined onto the buffered rest
 * (quadratic: 8 GB of copying, ~0.8 s; with 1-byte chunks ~minutes).
 */
function regressionPaxInSmallChunks(): { bytes: Uint8Array; cuts: number[] } {
  const bytes = concat(
    paxHeader([["comment", "x".repeat(1_000_000)]]),
    tarHeader("f", 0),
    new Uint8Array(1024),
  );
  const cuts = Array.from({ length: Math.floor(bytes.length / 64) }, (_, i) => (i + 1) * 64);
  return { bytes, cuts: cuts.map((c) => c / bytes.length) };
}

Deno.test("fuzz tar: regressions", async () => {
  const g = await walk(REGRESSION_GNU_SPARSE_EXTENDED);
  assert.equal(g.error, null);
  assert.deepEqual(g.entries.map((e) => [e.path, e.kind, e.size]), [
    ["sparse", "other", 1 << 30],
    ["after", "file", 5],
  ]);
  const p = await walk(REGRESSION_PAX_SPARSE_NAME);
  assert.equal(p.error, null);
  assert.deepEqual(p.entries.map((e) => [e.path, e.kind, e.size]), [
    ["real/name", "other", 1048576],
    ["after", "file", 1],
  ]);
  const { bytes, cuts } = regressionPaxInSmallChunks();
  const r = await within(FAST_MS, "1 MiB PAX record in 64-byte chunks", () => walk(bytes, cuts));
  assert.deepEqual(r.entries.map((e) => e.path), ["f"]);
});

// --- properties ----------------------------------------------------------------------------

Deno.test("fuzz tar: random bytes end in entries or a TarError, fast", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.uint8Array({ maxLength: 4096 }),
      fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 6 }),
      async (bytes, cuts) => {
        const w = await within(FAST_MS, "walk", () => walk(bytes, cuts));
        checkBounds(bytes, w);
      },
    ),
    fuzzParams(),
  );
});

Deno.test("fuzz tar: headers with random fields keep the walk bounded", async () => {
  // A valid checksum over random field bytes reaches the code behind the checksum test.
  const header = fc.record({
    fields: fc.uint8Array({ minLength: 512, maxLength: 512 }),
    type: fc.constantFrom(..."0125LKxgSVD7\0A".split("")),
    magic: fc.constantFrom("ustar\u000000", "ustar  \0", "\0\0\0\0\0\0\0\0"),
    body: fc.uint8Array({ maxLength: 1536 }),
  }).map(({ fields, type, magic, body }) => {
    const h = fields.slice();
    h[156] = type.charCodeAt(0);
    h.set(enc.encode(magic), 257);
    h.fill(0x20, 148, 156);
    const sum = h.reduce((n, b) => n + b, 0);
    h.set(enc.encode(sum.toString(8).padStart(6, "0") + "\0 "), 148);
    return concat(h, body);
  });
  await fc.assert(
    fc.asyncProperty(fc.array(header, { minLength: 1, maxLength: 4 }), async (hs) => {
      const bytes = concat(...hs, new Uint8Array(1024));
      checkBounds(bytes, await within(FAST_MS, "walk", () => walk(bytes)));
    }),
    fuzzParams(),
  );
});

for (const [name, sample] of Object.entries(SAMPLES)) {
  Deno.test(`fuzz tar: mutations of a valid ${name} archive`, async () => {
    const clean = await walk(sample);
    assert.equal(clean.error, null, `${name}: ${clean.error}`);
    assert.ok(clean.entries.length > 0);
    await fc.assert(
      fc.asyncProperty(mutated(sample), async (bytes) => {
        checkBounds(bytes, await within(FAST_MS, "walk", () => walk(bytes)));
      }),
      fuzzParams(),
    );
  });

  Deno.test(`fuzz tar: chunking never changes what a ${name} archive lists`, async () => {
    const whole = await walk(sample);
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 40 }),
        async (cuts) => {
          const w = await walk(sample, cuts);
          assert.deepEqual(w.entries, whole.entries);
          assert.deepEqual(w.data, whole.data);
          assert.equal(w.error, null);
        },
      ),
      fuzzParams(0.5),
    );
  });
}

// --- round trips through real tar writers ---------------------------------------------------

async function hasTool(cmd: string): Promise<boolean> {
  try {
    const { success } = await new Deno.Command(cmd, { args: ["--version"], stdout: "null" })
      .output();
    return success;
  } catch {
    return false;
  }
}

const segment = fc.stringMatching(/^[a-zA-Z0-9._-]{1,24}$/).filter((s) => s !== "." && s !== "..")
  .map((s) => s.startsWith(".wh.") ? `x${s}` : s);
const unicodeSegment = fc.constantFrom("ünï", "日本", "emoji😀", "sp ace", "a".repeat(120));
const treeArb = fc.uniqueArray(
  fc.record({
    dirs: fc.array(fc.oneof(segment, unicodeSegment), { maxLength: 3 }),
    name: fc.oneof(segment, unicodeSegment),
    data: fc.uint8Array({ maxLength: 3000 }),
    sparse: fc.option(fc.integer({ min: 1, max: 12 }), { freq: 4 }),
  }),
  { minLength: 1, maxLength: 6, selector: (f) => [...f.dirs, f.name].join("/").toLowerCase() },
).filter((files) => {
  // a file's path may not be another's directory
  const paths = files.map((f) => [...f.dirs, f.name].join("/").toLowerCase());
  return !paths.some((p) => paths.some((q) => q.startsWith(p + "/")));
});

const WRITERS: [string, string[]][] = [
  ["tar", ["--format=gnu"]],
  ["tar", ["--format=pax"]],
  ["tar", ["--format=pax", "--sparse-version=0.1"]],
  ["tar", ["--format=oldgnu"]],
  ["bsdtar", ["--format=pax"]],
  ["bsdtar", ["--format=gnutar"]],
];

for (const [tool, args] of WRITERS) {
  const label = `${tool} ${args.join(" ")}`;
  Deno.test({
    name: `fuzz tar: what ${label} writes is listed as the tool lists it`,
    ignore: !(await hasTool(tool)),
    fn: async () => {
      const dir = await Deno.makeTempDir({ prefix: "wharf-tar-fuzz-" });
      try {
        await fc.assert(
          fc.asyncProperty(treeArb, async (files) => {
            const root = `${dir}/${crypto.randomUUID()}`;
            const expected = new Map<string, { size: number; sparse: boolean }>();
            for (const f of files) {
              const rel = [...f.dirs, f.name].join("/");
              await Deno.mkdir(`${root}/${f.dirs.join("/")}`, { recursive: true });
              const path = `${root}/${rel}`;
              await Deno.writeFile(path, f.data);
              let size = f.data.length;
              if (f.sparse !== null) {
                // holes of 64 KiB between segments: what --sparse stores as a sparse file
                size = f.sparse * 65536 + f.data.length;
                const fh = await Deno.open(path, { write: true });
                await fh.truncate(size);
                await fh.seek(size - f.data.length, Deno.SeekMode.Start);
                await fh.write(f.data.length ? f.data : new Uint8Array([1]));
                fh.close();
                if (!f.data.length) size = f.sparse * 65536 + 1;
                await Deno.truncate(path, size);
              }
              expected.set(rel.normalize(), { size, sparse: f.sparse !== null });
            }
            const out = await new Deno.Command(tool, {
              args: [...args, ...(tool === "tar" ? ["--sparse"] : []), "-C", root, "-cf", "-", "."],
              stdout: "piped",
              stderr: "piped",
            }).output();
            assert.ok(out.success, new TextDecoder().decode(out.stderr));
            const w = await walk(out.stdout);
            assert.equal(w.error, null, String(w.error));
            const listed = new Map<string, TarEntry>();
            for (const e of w.entries) if (e.kind !== "dir") listed.set(e.path.normalize(), e);
            assert.deepEqual([...listed.keys()].sort(), [...expected.keys()].sort());
            for (const [p, x] of expected) {
              const e = listed.get(p)!;
              assert.equal(e.size, x.size, p);
              // a writer may store a file with few holes whole: sparse is the writer's choice
              if (e.kind === "other") assert.ok(x.sparse, `${p} listed as sparse`);
              else assert.equal(e.kind, "file", p);
            }
            await Deno.remove(root, { recursive: true });
          }),
          fuzzParams(0.05),
        );
      } finally {
        await Deno.remove(dir, { recursive: true });
      }
    },
  });
}
