// Property and mutation fuzzing of the ELF reader: any file of a layer may claim to be ELF.
import assert from "node:assert/strict";
import { readElf } from "./elf.ts";
import { FAST_MS, fc, fuzzParams, mutated, within } from "../../tests/helpers/fuzz.ts";

/** A reader over `b` that also counts what it was asked for. */
function reader(b: Uint8Array) {
  const stats = { calls: 0, bytes: 0 };
  const readAt = (offset: number, length: number) => {
    stats.calls++;
    stats.bytes += length;
    assert.ok(Number.isSafeInteger(offset) && offset >= 0, `offset ${offset}`);
    assert.ok(Number.isSafeInteger(length) && length >= 0, `length ${length}`);
    return Promise.resolve(b.slice(offset, offset + length));
  };
  return { readAt, stats };
}

/** A small 64-bit ELF header with a program header table of `phnum` zeroed entries. */
function minimalElf(is64: boolean, le: boolean, phnum: number): Uint8Array {
  const ehsize = is64 ? 64 : 52;
  const phentsize = is64 ? 56 : 32;
  const b = new Uint8Array(ehsize + phnum * phentsize + 256);
  const dv = new DataView(b.buffer);
  b.set([0x7f, 0x45, 0x4c, 0x46, is64 ? 2 : 1, le ? 1 : 2, 1], 0);
  dv.setUint16(16, 3, le);
  dv.setUint16(18, 62, le);
  if (is64) {
    dv.setBigUint64(32, BigInt(ehsize), le);
    dv.setUint16(54, phentsize, le);
    dv.setUint16(56, phnum, le);
  } else {
    dv.setUint32(28, ehsize, le);
    dv.setUint16(42, phentsize, le);
    dv.setUint16(44, phnum, le);
  }
  for (let i = 0; i < phnum; i++) {
    const at = ehsize + i * phentsize;
    // PT_INTERP, PT_DYNAMIC, PT_NOTE, PT_LOAD over the tail of the file
    dv.setUint32(at, [3, 2, 4, 1][i % 4], le);
    const off = ehsize + phnum * phentsize;
    if (is64) {
      dv.setBigUint64(at + 8, BigInt(off), le);
      dv.setBigUint64(at + 32, 256n, le);
    } else {
      dv.setUint32(at + 4, off, le);
      dv.setUint32(at + 16, 256, le);
    }
  }
  return b;
}

const SAMPLES: Record<string, Uint8Array> = {
  elf64le: minimalElf(true, true, 4),
  elf32be: minimalElf(false, false, 4),
};
for (const p of ["/usr/bin/true", "/bin/true"]) {
  try {
    SAMPLES.true = await Deno.readFile(p);
    break;
  } catch {
    // not on this machine: the hand-made samples remain
  }
}

/** What readElf may promise about any input: bounded reads, bounded output, no throw. */
async function check(b: Uint8Array): Promise<void> {
  const { readAt, stats } = reader(b);
  const info = await within(FAST_MS, "readElf", () => readElf(readAt, b.length));
  // capped: the head and at most 12 reads past it, each at most 1 MiB
  assert.ok(stats.calls <= 1 + 12, `${stats.calls} reads`);
  assert.ok(stats.bytes <= 64 * 1024 + 12 * 1024 * 1024, `${stats.bytes} bytes`);
  if (info === null) return;
  assert.ok(JSON.stringify(info).length < 4 * 1024 * 1024);
  assert.ok(info.needed.length <= 1024 && info.fortified.length <= 1024);
  if (info.partial) assert.equal(typeof info.error, "string");
}

Deno.test("fuzz elf: random bytes behind an ELF magic never throw", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.uint8Array({ minLength: 0, maxLength: 2048 }),
      fc.constantFrom(1, 2, 3),
      fc.constantFrom(1, 2, 0),
      async (rest, cls, data) => {
        const b = new Uint8Array(rest.length + 6);
        b.set([0x7f, 0x45, 0x4c, 0x46, cls, data]);
        b.set(rest, 6);
        await check(b);
      },
    ),
    fuzzParams(),
  );
});

for (const [name, sample] of Object.entries(SAMPLES)) {
  Deno.test(`fuzz elf: mutations of ${name} never throw`, async () => {
    assert.notEqual(await readElf(reader(sample).readAt, sample.length), null);
    // most mutations land in the headers, where the reader's decisions are
    const head = sample.subarray(0, 4096);
    await fc.assert(
      fc.asyncProperty(mutated(head, 12), async (h) => {
        const b = new Uint8Array(h.length + sample.length - head.length);
        b.set(h);
        b.set(sample.subarray(head.length), h.length);
        await check(b);
      }),
      fuzzParams(name === "true" ? 0.5 : 1),
    );
  });
}
