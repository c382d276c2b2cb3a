// The tar walker against archives written by GNU tar (gnu, pax, ustar, v7 formats), bsdtar
// (libarchive's PAX with its own xattr records) and a Go archive/tar-style writer built here
// (ustar magic with PAX records for long names, base-256 numbers), plus hostile archives.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { type TarEntry, TarError, walkTar } from "./tar.ts";
import { normalizePath } from "./tar_header.ts";
import { decodeCapabilities } from "./tar_caps.ts";

async function sh(cmd: string, args: string[], cwd?: string): Promise<string> {
  const out = await new Deno.Command(cmd, { args, cwd, stdout: "piped", stderr: "piped" })
    .output();
  const dec = new TextDecoder();
  if (!out.success) throw new Error(`${cmd} ${args.join(" ")}: ${dec.decode(out.stderr)}`);
  return dec.decode(out.stdout);
}

interface Walked {
  entries: TarEntry[];
  sha256: Map<string, string>;
  error: unknown;
}

async function walk(
  bytes: Uint8Array,
  opts: { maxEntries?: number; chunk?: number } = {},
): Promise<Walked> {
  const chunk = opts.chunk ?? 7919;
  const parts: Uint8Array[] = [];
  for (let i = 0; i < bytes.length; i += chunk) parts.push(bytes.subarray(i, i + chunk));
  const entries: TarEntry[] = [];
  const sha256 = new Map<string, string>();
  let h = createHash("sha256");
  let error: unknown = null;
  try {
    for await (
      const e of walkTar(ReadableStream.from(parts), {
        maxEntries: opts.maxEntries,
        onData: (_e, c) => h.update(c),
      })
    ) {
      if (e.kind === "file") sha256.set(e.path, h.digest("hex"));
      h = createHash("sha256");
      entries.push(e);
    }
  } catch (e) {
    error = e;
  }
  return { entries, sha256, error };
}

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");
const LONG = "d".repeat(60) + "/" + "e".repeat(70) + "/" + "f".repeat(120) + ".txt";

/** A tree with every entry kind; returns the files' contents by tar path. */
async function makeTree(root: string, opts: { long: boolean }): Promise<Map<string, Uint8Array>> {
  const files = new Map<string, Uint8Array>();
  const put = async (p: string, data: Uint8Array) => {
    await Deno.mkdir(`${root}/${p}`.replace(/\/[^/]+$/, ""), { recursive: true });
    await Deno.writeFile(`${root}/${p}`, data);
    files.set(p, data);
  };
  await put("etc/hosts", new TextEncoder().encode("127.0.0.1 localhost\n"));
  await put("etc/empty", new Uint8Array(0));
  await put("usr/bin/tool", new Uint8Array(65_536 + 123).map((_, i) => (i * 7919) % 251));
  await put("etc/.wh.removed", new Uint8Array(0));
  await put("opt/app/.wh..wh..opq", new Uint8Array(0));
  await put("blk/exact", new Uint8Array(1024).fill(7));
  if (opts.long) await put(LONG, new TextEncoder().encode("long name\n"));
  await Deno.symlink("../etc/hosts", `${root}/usr/hosts-link`);
  if (opts.long) await Deno.symlink("/" + "t".repeat(150), `${root}/usr/long-link`);
  await Deno.link(`${root}/etc/hosts`, `${root}/etc/hosts.hard`);
  await sh("mkfifo", [`${root}/usr/fifo`]);
  await Deno.mkdir(`${root}/var/empty`, { recursive: true });
  return files;
}

async function tarBytes(root: string, args: string[], tool = "tar"): Promise<Uint8Array> {
  const out = `${root}.tar`;
  await sh(tool, [...args, "-cf", out, "-C", root, "."]);
  const b = await Deno.readFile(out);
  await Deno.remove(out);
  return b;
}

function checkTree(
  w: Walked,
  files: Map<string, Uint8Array>,
  archive: Uint8Array,
  opts: { fifo: boolean } = { fifo: true },
) {
  assert.equal(w.error, null, String(w.error));
  const by = new Map(w.entries.map((e) => [e.path, e]));
  for (const e of w.entries) {
    assert.ok(!e.path.startsWith("./") && !e.path.startsWith("/") && !e.path.endsWith("/"));
  }
  for (const [p, data] of files) {
    if (p.includes(".wh.")) continue;
    const e = by.get(p);
    assert.ok(e, `missing ${p}`);
    if (p === "etc/hosts.hard" || e.kind === "hardlink") continue;
    assert.equal(e.kind, "file", p);
    assert.equal(e.size, data.length, p);
    assert.equal(w.sha256.get(p), sha(data), p);
    // The offset points at the file's bytes in the archive.
    assert.deepEqual(archive.subarray(e.offset, e.offset + data.length), data, p);
  }
  // GNU tar stores the second name of a hard link as the link.
  const hard = [by.get("etc/hosts"), by.get("etc/hosts.hard")];
  const link = hard.find((e) => e?.kind === "hardlink")!;
  assert.ok(link, "one of the two hard-linked names is a link");
  assert.equal(link.size, 0);
  assert.ok(["etc/hosts", "etc/hosts.hard"].includes(link.linkTarget!));
  assert.equal(w.sha256.has(link.path), false, "a hard link carries no content");
  assert.deepEqual(
    [by.get("usr/hosts-link")?.kind, by.get("usr/hosts-link")?.linkTarget],
    ["symlink", "../etc/hosts"],
  );
  if (opts.fifo) assert.equal(by.get("usr/fifo")?.kind, "other");
  assert.equal(by.get("var/empty")?.kind, "dir");
  assert.equal(by.get("etc/removed")?.kind, "whiteout");
  assert.equal(by.get("opt/app")?.kind === "dir" || by.get("opt/app")?.kind === "opaque", true);
  assert.ok(w.entries.some((e) => e.kind === "opaque" && e.path === "opt/app"));
  assert.ok(w.entries.some((e) => e.kind === "dir" && e.path === "opt/app"));
}

async function withTree(
  opts: { long: boolean },
  fn: (root: string, files: Map<string, Uint8Array>) => Promise<void>,
) {
  const dir = await Deno.makeTempDir();
  try {
    const root = `${dir}/root`;
    await Deno.mkdir(root);
    await fn(root, await makeTree(root, opts));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

for (const format of ["gnu", "pax", "posix", "oldgnu"]) {
  Deno.test(`GNU tar --format=${format}: every kind, long names, offsets and hashes`, async () => {
    await withTree({ long: true }, async (root, files) => {
      const bytes = await tarBytes(root, [`--format=${format}`]);
      const w = await walk(bytes);
      checkTree(w, files, bytes);
      const long = w.entries.find((e) => e.path === LONG);
      assert.ok(long, "long name");
      const ll = w.entries.find((e) => e.path === "usr/long-link");
      assert.equal(ll?.linkTarget, "/" + "t".repeat(150));
    });
  });
}

Deno.test("GNU tar ustar and v7 (short names only): prefix field, v7 directories", async () => {
  await withTree({ long: false }, async (root, files) => {
    // ustar keeps a name over 100 bytes in the prefix field
    const split = "p".repeat(90) + "/" + "q".repeat(90) + ".txt";
    await Deno.mkdir(`${root}/${"p".repeat(90)}`);
    await Deno.writeFile(`${root}/${split}`, new Uint8Array([1, 2, 3]));
    files.set(split, new Uint8Array([1, 2, 3]));
    let bytes = await tarBytes(root, ["--format=ustar"]);
    checkTree(await walk(bytes), files, bytes);
    // v7 has no fifos, no prefix; directories are names with a trailing slash
    files.delete(split);
    await Deno.remove(`${root}/${"p".repeat(90)}`, { recursive: true });
    await Deno.remove(`${root}/usr/fifo`);
    bytes = await tarBytes(root, ["--format=v7"]);
    checkTree(await walk(bytes), files, bytes, { fifo: false });
  });
});

Deno.test("bsdtar PAX (libarchive records) and chunk boundaries of 1 byte", async () => {
  await withTree({ long: true }, async (root, files) => {
    const bytes = await tarBytes(root, ["--format=pax"], "bsdtar");
    checkTree(await walk(bytes), files, bytes);
    const small = await walk(bytes.subarray(0, 20 * 1024), { chunk: 1 });
    assert.ok(small.entries.length > 3);
  });
});

Deno.test("PAX security.capability xattr from setcap gives the permitted names", async () => {
  await withTree({ long: false }, async (root) => {
    await Deno.copyFile("/usr/bin/true", `${root}/usr/bin/captrue`);
    await sh("setcap", ["cap_net_bind_service,cap_net_raw=+ep", `${root}/usr/bin/captrue`]);
    for (const tool of ["tar", "bsdtar"]) {
      const args = tool === "tar"
        ? ["--format=pax", "--xattrs", "--xattrs-include=security.capability"]
        : ["--format=pax", "--xattrs"];
      const w = await walk(await tarBytes(root, args, tool));
      assert.equal(w.error, null);
      const e = w.entries.find((x) => x.path === "usr/bin/captrue");
      assert.deepEqual(e?.capabilities, ["cap_net_bind_service", "cap_net_raw"], tool);
      assert.equal(w.entries.find((x) => x.path === "etc/hosts")?.capabilities, undefined);
    }
  });
});

Deno.test("capability values: revisions 1–3, high capability numbers, junk", () => {
  const cap = (rev: number, words: number[]) => {
    const b = new Uint8Array(4 + 8 * (words.length) + (rev === 3 ? 4 : 0));
    const dv = new DataView(b.buffer);
    dv.setUint32(0, (rev << 24) | 1, true);
    words.forEach((w, i) => dv.setUint32(4 + 8 * i, w, true));
    return b;
  };
  assert.deepEqual(decodeCapabilities(cap(1, [1 << 0 | 1 << 21])), ["cap_chown", "cap_sys_admin"]);
  assert.deepEqual(decodeCapabilities(cap(2, [0, 1 << 7])), ["cap_bpf"]);
  assert.deepEqual(decodeCapabilities(cap(3, [0, 1 << 8 | 1 << 31])), [
    "cap_checkpoint_restore",
    "cap_63",
  ]);
  assert.deepEqual(decodeCapabilities(new Uint8Array(3)), []);
  assert.deepEqual(decodeCapabilities(cap(9, [1])), []);
});

Deno.test("path normalisation", () => {
  assert.equal(normalizePath("./etc/"), "etc");
  assert.equal(normalizePath("/usr//bin/./x"), "usr/bin/x");
  assert.equal(normalizePath("./"), "");
});

// A minimal Go archive/tar-style writer: ustar magic "ustar\0" "00", PAX records for what the
// header cannot hold, base-256 for large numbers.
function header(
  f: {
    name: string;
    type?: string;
    size?: number;
    link?: string;
    uid?: number;
    mtime?: number;
    mode?: number;
    base256Size?: boolean;
    rawSize?: Uint8Array;
  },
): Uint8Array {
  const h = new Uint8Array(512);
  const enc = new TextEncoder();
  const put = (off: number, s: string) => h.set(enc.encode(s), off);
  const oct = (off: number, len: number, v: number) =>
    put(off, v.toString(8).padStart(len - 1, "0") + "\0");
  put(0, f.name);
  oct(100, 8, f.mode ?? 0o644);
  if ((f.uid ?? 0) > 0o7777777) {
    h[108] = 0x80;
    new DataView(h.buffer).setUint32(112, f.uid!);
  } else oct(108, 8, f.uid ?? 0);
  oct(116, 8, 0);
  if (f.rawSize) h.set(f.rawSize, 124);
  else if (f.base256Size) {
    h[124] = 0x80;
    let v = f.size ?? 0;
    for (let i = 135; i > 124; i--) {
      h[i] = v % 256;
      v = Math.floor(v / 256);
    }
  } else oct(124, 12, f.size ?? 0);
  oct(136, 12, f.mtime ?? 1_700_000_000);
  put(156, f.type ?? "0");
  if (f.link) put(157, f.link);
  put(257, "ustar\u000000");
  let sum = 0;
  for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 32 : h[i];
  put(148, sum.toString(8).padStart(6, "0") + "\0 ");
  return h;
}

function paxRecords(kv: [string, string | Uint8Array][]): Uint8Array {
  const enc = new TextEncoder();
  const out: number[] = [];
  for (const [k, v] of kv) {
    const val = typeof v === "string" ? enc.encode(v) : v;
    const body = enc.encode(` ${k}=`).length + val.length + 1;
    let len = body + String(body).length;
    if (String(len).length !== String(body).length) len++;
    out.push(...enc.encode(`${len} ${k}=`), ...val, 0x0a);
  }
  return new Uint8Array(out);
}

function pad(b: Uint8Array): Uint8Array {
  const out = new Uint8Array(Math.ceil(b.length / 512) * 512);
  out.set(b);
  return out;
}

function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

const END = new Uint8Array(1024);

Deno.test("Go-style writer: PAX path/size/mtime/uid, base-256 uid and size, devices", async () => {
  const data = new TextEncoder().encode("hello from go\n");
  const longPath = "a/".repeat(80) + "file.txt";
  const pax = paxRecords([
    ["path", longPath],
    ["mtime", "1700000001.123456789"],
    ["uid", "3000000000"],
    ["gid", "42"],
    ["size", String(data.length)],
    [
      "SCHILY.xattr.security.capability",
      new Uint8Array([0, 0, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
    ],
    ["SCHILY.xattr.user.comment", new Uint8Array([0, 255, 10, 61])],
  ]);
  const archive = concat(
    header({ name: "PaxHeaders/x", type: "x", size: pax.length }),
    pad(pax),
    header({ name: "ignored", size: 999_999 }), // PAX size wins over the header's
    pad(data),
    header({ name: "big-uid", uid: 0o7777777 + 5, size: 3, base256Size: true }),
    pad(new Uint8Array([1, 2, 3])),
    header({ name: "dev/null", type: "3" }),
    header({ name: "dev/sda", type: "4" }),
    header({ name: "run/", type: "5", mode: 0o40755 }),
    header({ name: "lnk", type: "1", link: "./big-uid", size: 3 }), // a link's size moves nothing
    header({ name: "after", size: 1 }),
    pad(new Uint8Array([9])),
    END,
  );
  const w = await walk(archive);
  assert.equal(w.error, null, String(w.error));
  const [f, big, chr, blk, run, lnk, after] = w.entries;
  assert.deepEqual([after.path, after.size, after.offset % 512], ["after", 1, 0]);
  assert.equal(w.entries.length, 7);
  assert.deepEqual(
    [f.path, f.size, f.mtime, f.uid, f.gid, f.capabilities],
    [longPath, data.length, 1_700_000_001, 3_000_000_000, 42, ["cap_net_bind_service"]],
  );
  assert.equal(w.sha256.get(longPath), sha(data));
  assert.deepEqual(archive.subarray(f.offset, f.offset + data.length), data);
  assert.deepEqual([big.uid, big.size], [0o7777777 + 5, 3]);
  assert.deepEqual([chr.kind, blk.kind, run.kind, run.mode], ["other", "other", "dir", 0o755]);
  assert.deepEqual([lnk.kind, lnk.linkTarget, lnk.size], ["hardlink", "big-uid", 0]);
  assert.equal(w.sha256.get("after"), sha(new Uint8Array([9])));
});

Deno.test("archives without end blocks, or ending after one zero block, are whole", async () => {
  const one = concat(header({ name: "x", size: 1 }), pad(new Uint8Array([1])));
  for (const tail of [new Uint8Array(0), new Uint8Array(512)]) {
    const w = await walk(concat(one, tail));
    assert.equal(w.error, null);
    assert.equal(w.entries.length, 1);
  }
});

Deno.test("truncated and corrupt archives: entries read so far, then a TarError", async () => {
  const a = new Uint8Array(5000).fill(1);
  const archive = concat(
    header({ name: "first", size: 10 }),
    pad(new Uint8Array(10)),
    header({ name: "second", size: a.length }),
    pad(a),
    END,
  );
  // cut inside the second file's data
  let w = await walk(archive.subarray(0, 1024 + 512 + 100));
  assert.ok(w.error instanceof TarError, String(w.error));
  assert.match((w.error as Error).message, /truncated in the data of "second"/);
  assert.deepEqual(w.entries.map((e) => e.path), ["first"]);
  // cut inside a header
  w = await walk(archive.subarray(0, 1024 + 100));
  assert.match(String(w.error), /truncated header/);
  // bad checksum
  const bad = archive.slice();
  bad[1024 + 3] ^= 0xff;
  w = await walk(bad);
  assert.match(String(w.error), /bad checksum/);
  assert.equal(w.entries.length, 1);
  // garbage from the start
  w = await walk(crypto.getRandomValues(new Uint8Array(4096)));
  assert.ok(w.error instanceof TarError);
  assert.equal(w.entries.length, 0);
  // an extended header with nothing after it
  const pax = paxRecords([["path", "x"]]);
  w = await walk(concat(header({ name: "p", type: "x", size: pax.length }), pad(pax)));
  assert.match(String(w.error), /ends after an extended header/);
});

Deno.test("hostile archives: absurd and negative sizes, huge PAX, malformed PAX, entry cap", async () => {
  // A size of 2^52 bytes: streaming past the end reports truncation, nothing is allocated.
  let w = await walk(
    concat(header({ name: "huge", size: 2 ** 52, base256Size: true }), pad(new Uint8Array(10))),
  );
  assert.match(String(w.error), /truncated in the data of "huge"/);
  // base-256 negative size
  const neg = new Uint8Array(12).fill(0xff);
  w = await walk(concat(header({ name: "neg", rawSize: neg }), END));
  assert.match(String(w.error), /size field/);
  // non-octal size
  w = await walk(concat(header({ name: "nan", rawSize: new TextEncoder().encode("9999z") }), END));
  assert.match(String(w.error), /size field/);
  // A 1 GiB PAX header is refused before any of it is read.
  w = await walk(concat(header({ name: "p", type: "x", size: 2 ** 30 }), END));
  assert.match(String(w.error), /extended header of 1073741824 bytes/);
  for (
    const rec of [
      "999999 path=x\n",
      "5 path=x\n",
      "x path=y\n",
      "12 pathxxxx\n\n",
      "10 size=-1\n",
      "14 mtime=1e400\n",
    ]
  ) {
    const p = new TextEncoder().encode(rec);
    w = await walk(concat(header({ name: "p", type: "x", size: p.length }), pad(p), END));
    assert.ok(w.error instanceof TarError, `${JSON.stringify(rec)}: ${w.error}`);
  }
  // many tiny entries: the cap ends the walk cleanly
  const many: Uint8Array[] = [];
  for (let i = 0; i < 50; i++) many.push(header({ name: `f${i}`, type: "5" }));
  w = await walk(concat(...many, END), { maxEntries: 20 });
  assert.equal(w.entries.length, 20);
  assert.match(String(w.error), /more than 20 entries/);
});

Deno.test("a stream that errors mid-walk rejects, and an abandoned walk releases the stream", async () => {
  let cancelled = false;
  const src = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(concat(header({ name: "a" }), header({ name: "b" })));
    },
    cancel() {
      cancelled = true;
    },
  });
  for await (const e of walkTar(src)) {
    assert.equal(e.path, "a");
    break;
  }
  assert.ok(cancelled);
  const failing = new ReadableStream<Uint8Array>({
    pull(c) {
      c.error(new Error("source broke"));
    },
  });
  await assert.rejects(async () => {
    for await (const _ of walkTar(failing)) { /* nothing */ }
  }, /source broke/);
});
