// The ELF reader against readelf on this machine's binaries and on programs compiled here with
// each hardening flag on and off, then against hostile files: every prefix of a real binary,
// offsets past the end, absurd counts, a dynamic section without DT_NULL, big-endian 32-bit.
import assert from "node:assert/strict";
import { type ElfInfo, isElf, readElf } from "./elf.ts";

async function run(cmd: string, args: string[]): Promise<string> {
  const out = await new Deno.Command(cmd, { args, stdout: "piped", stderr: "piped" }).output();
  const dec = new TextDecoder();
  if (!out.success) throw new Error(`${cmd} ${args.join(" ")}: ${dec.decode(out.stderr)}`);
  return dec.decode(out.stdout);
}

function reader(b: Uint8Array) {
  const stats = { calls: 0, bytes: 0 };
  const readAt = (o: number, n: number) => {
    stats.calls++;
    const x = b.subarray(Math.max(0, o), Math.max(0, o + n));
    stats.bytes += x.length;
    return Promise.resolve(x);
  };
  return { readAt, stats };
}

async function elfOf(path: string): Promise<{ info: ElfInfo; calls: number; bytes: number }> {
  const b = await Deno.readFile(path);
  const { readAt, stats } = reader(b);
  const info = await readElf(readAt, b.length);
  assert.ok(info, `${path} is ELF`);
  return { info, ...stats };
}

/** What readelf says about the same facts. */
async function readelf(path: string) {
  const t = await run("readelf", ["-h", "-l", "-d", "-n", "-S", "--dyn-syms", "-W", path]);
  const dynFlags = /\(FLAGS\)\s+(.*)/.exec(t)?.[1] ?? "";
  const flags1 = /\(FLAGS_1\)\s+Flags: (.*)/.exec(t)?.[1] ?? "";
  const bindNow = /BIND_NOW/.test(dynFlags) || /\bNOW\b/.test(flags1) || /\(BIND_NOW\)/.test(t);
  const relro = /GNU_RELRO/.test(t) ? (bindNow ? "full" : "partial") : "none";
  const stack = /GNU_STACK.*\s(RWE|RW E)\s/.exec(t) !== null;
  const imports = [...t.matchAll(/^\s+\d+: [0-9a-f]+\s+\d+ \w+\s+\w+\s+\w+\s+UND (\S+)/gm)].map(
    (m) => m[1].replace(/@.*/, ""),
  );
  return {
    type: /Type:\s+(\w+)/.exec(t)![1],
    machine: /Machine:\s+(.*)/.exec(t)![1].trim(),
    bits: /Class:\s+ELF64/.test(t) ? 64 : 32,
    endian: /little endian/.test(t) ? "little" : "big",
    entry: "0x" + /Entry point address:\s+0x([0-9a-f]+)/.exec(t)![1].replace(/^0+(?=.)/, ""),
    interpreter: /Requesting program interpreter: ([^\]]+)\]/.exec(t)?.[1] ?? "",
    dynamic: /\sDYNAMIC\s/.test(t),
    needed: [...t.matchAll(/\(NEEDED\)\s+Shared library: \[([^\]]+)\]/g)].map((m) => m[1]),
    soname: /\(SONAME\)\s+Library soname: \[([^\]]+)\]/.exec(t)?.[1] ?? null,
    build_id: /Build ID: ([0-9a-f]+)/.exec(t)?.[1] ?? "",
    relro,
    executable_stack: stack,
    pie: /\bPIE\b/.test(flags1),
    stack_canary: imports.includes("__stack_chk_fail") || imports.includes("__stack_chk_guard"),
    rpath: (/\(RPATH\)\s+Library rpath: \[([^\]]+)\]/.exec(t)?.[1] ?? "").split(":").filter(
      Boolean,
    ),
    runpath: (/\(RUNPATH\)\s+Library runpath: \[([^\]]+)\]/.exec(t)?.[1] ?? "").split(":")
      .filter(Boolean),
    stripped: !/\]\s+\.symtab\s+SYMTAB/.test(t),
    fortified: [
      ...new Set(imports.filter((n) => /^__\w+_chk$/.test(n) && n !== "__stack_chk_fail")),
    ]
      .sort(),
  };
}

const SYSTEM = [
  "/usr/bin/ls",
  "/usr/bin/true",
  "/bin/bash",
  "/usr/lib/x86_64-linux-gnu/libc.so.6",
  "/lib64/ld-linux-x86-64.so.2",
].filter((p) => {
  try {
    return Deno.statSync(p).isFile;
  } catch {
    return false;
  }
});

Deno.test("ELF: this machine's binaries match readelf, read in a few small ranged reads", async () => {
  assert.ok(SYSTEM.length >= 3);
  for (const p of SYSTEM) {
    const { info, calls, bytes } = await elfOf(p);
    const want = await readelf(p);
    const got = { ...info };
    // readelf's PIE comes from FLAGS_1 only; ours also knows old-linker executables.
    if (!/PIE/.test(await run("readelf", ["-d", p]))) got.pie = want.pie;
    assert.deepEqual(got, want, p);
    assert.equal(info.partial, undefined);
    assert.ok(calls <= 8, `${p}: ${calls} reads`);
    const size = (await Deno.stat(p)).size;
    assert.ok(bytes < Math.max(size / 2, 300_000), `${p}: read ${bytes} of ${size} bytes`);
  }
});

Deno.test("ELF: compiled with and without each hardening flag", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const src = `${dir}/p.c`;
    await Deno.writeTextFile(
      src,
      `#include <stdio.h>
#include <string.h>
int main(int argc, char **argv) { char b[64]; strcpy(b, argv[0]); memcpy(b, argv[0], argc);
  printf("%s %d\\n", b, argc); return 0; }
`,
    );
    const builds: [string, string[], Partial<ElfInfo>][] = [
      ["hardened", [
        "-O2",
        "-D_FORTIFY_SOURCE=2",
        "-fstack-protector-all",
        "-pie",
        "-fPIE",
        "-Wl,-z,relro,-z,now",
      ], { pie: true, stack_canary: true, relro: "full" }],
      ["plain", ["-O0", "-fno-stack-protector", "-no-pie", "-Wl,-z,norelro"], {
        pie: false,
        stack_canary: false,
        relro: "none",
        type: "EXEC",
        fortified: [],
      }],
      ["execstack", ["-O0", "-z", "execstack"], { executable_stack: true }],
      ["rpath", ["-O0", "-Wl,--disable-new-dtags,-rpath,/opt/a:/opt/b"], {
        rpath: ["/opt/a", "/opt/b"],
        runpath: [],
      }],
      ["runpath", ["-O0", "-Wl,--enable-new-dtags,-rpath,/opt/c"], { runpath: ["/opt/c"] }],
      ["static", ["-O0", "-static"], { dynamic: false, interpreter: "", needed: [] }],
      ["shared", ["-O0", "-shared", "-fPIC", "-Wl,-soname,libp.so.1"], {
        soname: "libp.so.1",
        pie: false,
      }],
    ];
    for (const [name, flags, expect] of builds) {
      const out = `${dir}/${name}`;
      await run("gcc", [...flags, "-o", out, src]);
      const { info } = await elfOf(out);
      const want = await readelf(out);
      for (const [k, v] of Object.entries(expect)) {
        assert.deepEqual(info[k as keyof ElfInfo], v, `${name}.${k}`);
      }
      assert.deepEqual(
        [info.relro, info.executable_stack, info.stack_canary, info.fortified, info.stripped],
        [want.relro, want.executable_stack, want.stack_canary, want.fortified, want.stripped],
        name,
      );
      if (name === "hardened") assert.ok(info.fortified.length > 0, "fortified functions");
      // stripping removes .symtab
      if (name === "plain") {
        assert.equal(info.stripped, false);
        await run("strip", [out]);
        assert.equal((await elfOf(out)).info.stripped, true);
      }
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

function put(b: Uint8Array, at: number, v: number, bytes: number, le = true) {
  const dv = new DataView(b.buffer, b.byteOffset);
  if (bytes === 2) dv.setUint16(at, v, le);
  else if (bytes === 4) dv.setUint32(at, v, le);
  else dv.setBigUint64(at, BigInt(v), le);
}

Deno.test("ELF: hostile and truncated files give partial answers, never throw or hang", async () => {
  const real = await Deno.readFile("/usr/bin/ls");
  // every 64-byte prefix of the first 4 KiB, and a few larger cuts
  for (let n = 0; n <= 4096; n += 64) {
    const b = real.slice(0, n);
    const r = await readElf(reader(b).readAt, b.length);
    if (n < 64) assert.equal(r, null, `prefix ${n}`);
    else assert.ok(r === null || typeof r.type === "string");
  }
  for (const n of [20_000, 100_000, real.length - 1000]) {
    const b = real.slice(0, n);
    const r = await readElf(reader(b).readAt, b.length);
    assert.ok(r);
  }
  const mutate = (f: (b: Uint8Array) => void) => {
    const b = real.slice();
    f(b);
    return b;
  };
  const cases: [string, Uint8Array][] = [
    ["phoff past the end", mutate((b) => put(b, 32, 2 ** 40, 8))],
    ["65535 program headers", mutate((b) => put(b, 56, 65535, 2))],
    ["tiny phentsize", mutate((b) => put(b, 54, 4, 2))],
    ["shoff past the end", mutate((b) => put(b, 40, 2 ** 50, 8))],
    ["65535 sections", mutate((b) => put(b, 60, 65535, 2))],
    ["entry beyond 2^53", mutate((b) => put(b, 24, Number.MAX_SAFE_INTEGER, 8))],
  ];
  for (const [name, b] of cases) {
    const r = await readElf(reader(b).readAt, b.length);
    assert.ok(r, name);
    assert.equal(r.bits, 64, name);
  }
  const r1 = await readElf(reader(cases[0][1]).readAt, cases[0][1].length);
  assert.equal(r1!.partial, true);
  assert.match(r1!.error!, /program header table/);
  const r2 = await readElf(reader(cases[1][1]).readAt, cases[1][1].length);
  assert.equal(r2!.partial, true);
  assert.match(r2!.error!, /65535 program headers/);

  // A hand-made 64-bit file: PT_DYNAMIC whose DT_STRTAB points far away, a DT_NEEDED string
  // without a terminator, and no DT_NULL.
  const f = new Uint8Array(4096);
  f.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]);
  put(f, 16, 3, 2); // ET_DYN
  put(f, 18, 62, 2);
  put(f, 32, 64, 8); // phoff
  put(f, 54, 56, 2);
  put(f, 56, 2, 2); // two program headers
  // PT_LOAD covering the file at vaddr 0
  put(f, 64, 1, 4);
  put(f, 64 + 8, 0, 8);
  put(f, 64 + 16, 0, 8);
  put(f, 64 + 32, 4096, 8);
  // PT_DYNAMIC at 1024, 3 entries, no DT_NULL
  put(f, 120, 2, 4);
  put(f, 120 + 8, 1024, 8);
  put(f, 120 + 32, 48, 8);
  put(f, 1024, 5, 8); // DT_STRTAB
  put(f, 1032, 4000, 8);
  put(f, 1040, 1, 8); // DT_NEEDED
  put(f, 1048, 90, 8); // beyond the 96 bytes of table left
  put(f, 1056, 10, 8); // DT_STRSZ
  put(f, 1064, 1_000_000, 8);
  f.fill(0x41, 4000); // unterminated
  const r3 = await readElf(reader(f).readAt, f.length);
  assert.ok(r3);
  assert.equal(r3.partial, true);
  assert.match(r3.error!, /DT_NULL/);
  assert.ok(r3.needed.length <= 1 && r3.needed.every((s) => s.length <= 4096));

  // Big-endian 32-bit MIPS header with nothing else
  const be = new Uint8Array(64);
  be.set([0x7f, 0x45, 0x4c, 0x46, 1, 2, 1]);
  put(be, 16, 2, 2, false);
  put(be, 18, 8, 2, false);
  put(be, 24, 0x400120, 4, false);
  const r4 = await readElf(reader(be).readAt, be.length);
  assert.deepEqual(
    [r4!.bits, r4!.endian, r4!.machine, r4!.type, r4!.entry, r4!.dynamic],
    [32, "big", "MIPS R3000", "EXEC", "0x400120", false],
  );
  // Not ELF at all
  assert.equal(isElf(new TextEncoder().encode("#!/bin/sh\n")), false);
  assert.equal(await readElf(reader(new Uint8Array(100)).readAt, 100), null);
  const badClass = real.slice(0, 64);
  badClass[4] = 9;
  assert.equal(await readElf(reader(badClass).readAt, 64), null);
});

/** A 64-bit ELF built to make a reader work as hard as its caps allow: 510 note segments past
 * the head (none with a build id), an unterminated 1 MiB string table and 43,690 imported
 * symbols that all name its first byte. */
function costlyElf(): Uint8Array {
  const MiB = 1024 * 1024;
  const f = new Uint8Array(3 * MiB);
  f.set([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1]);
  put(f, 16, 3, 2);
  put(f, 18, 62, 2);
  put(f, 32, 64, 8); // phoff
  put(f, 54, 56, 2);
  put(f, 56, 512, 2);
  const ph = (i: number, type: number, offset: number, filesz: number) => {
    const at = 64 + i * 56;
    put(f, at, type, 4);
    put(f, at + 8, offset, 8);
    put(f, at + 16, offset, 8);
    put(f, at + 32, filesz, 8);
    put(f, at + 48, 4, 8);
  };
  ph(0, 1, 0, f.length); // PT_LOAD: vaddr == offset
  ph(1, 2, 40_000, 64); // PT_DYNAMIC
  for (let i = 2; i < 512; i++) ph(i, 4, 70_000 + i * 1024, 64 * 1024); // PT_NOTE
  const dyn = [[6, MiB], [11, 24], [5, 2 * MiB], [10, MiB], [0, 0]]; // SYMTAB SYMENT STRTAB STRSZ
  dyn.forEach(([t, v], i) => {
    put(f, 40_000 + i * 16, t, 8);
    put(f, 40_000 + i * 16 + 8, v, 8);
  });
  f.fill(0x5f, 2 * MiB); // "____…": every name looks like a candidate, none ends
  return f;
}

Deno.test("ELF: a file crafted for cost is read in a bounded number of small reads", async () => {
  const f = costlyElf();
  const { readAt, stats } = reader(f);
  const r = await readElf(readAt, f.length);
  assert.ok(r);
  assert.equal(r.partial, true);
  // 513 reads and 35 MB (11 s on the serving thread) before the read caps
  assert.ok(stats.calls <= 16, `${stats.calls} reads`);
  assert.ok(stats.bytes <= 4 * 1024 * 1024, `${stats.bytes} bytes read`);
});
