// Shared settings of the property and mutation fuzz suites (`*_fuzz_test.ts`). `deno task test`
// runs each property a few hundred times so the suites stay cheap on CI; `deno task fuzz` sets
// FUZZ_RUNS for a long hunt. FUZZ_SEED replays a failure fast-check printed.
import fc from "fast-check";
import process from "node:process";

const envInt = (name: string): number | undefined => {
  const v = Deno.env.get(name);
  if (v === undefined || v === "") return undefined;
  const n = Number(v);
  if (!Number.isSafeInteger(n)) throw new Error(`${name}=${v} is not an integer`);
  return n;
};

/** Runs per property: FUZZ_RUNS, or a small default. `scale` thins out the costly ones. */
export function fuzzRuns(scale = 1): number {
  return Math.max(1, Math.round((envInt("FUZZ_RUNS") ?? 200) * scale));
}

/** fast-check parameters for one property. */
export function fuzzParams<T>(scale = 1): fc.Parameters<T> {
  const seed = envInt("FUZZ_SEED");
  return { numRuns: fuzzRuns(scale), ...(seed === undefined ? {} : { seed }) };
}

/** A single input must finish within this long, however hostile it is. */
export const FAST_MS = 2000;

/** Mutations of a valid sample: byte flips, inserts, deletes, truncation and extension. */
export function mutated(sample: Uint8Array, maxEdits = 8): fc.Arbitrary<Uint8Array> {
  const edit = fc.oneof(
    fc.record({
      op: fc.constant("flip" as const),
      at: fc.nat(),
      bit: fc.integer({ min: 0, max: 7 }),
    }),
    fc.record({
      op: fc.constant("set" as const),
      at: fc.nat(),
      v: fc.integer({ min: 0, max: 255 }),
    }),
    fc.record({
      op: fc.constant("insert" as const),
      at: fc.nat(),
      bytes: fc.uint8Array({ minLength: 1, maxLength: 16 }),
    }),
    fc.record({
      op: fc.constant("delete" as const),
      at: fc.nat(),
      n: fc.integer({ min: 1, max: 64 }),
    }),
    fc.record({ op: fc.constant("truncate" as const), at: fc.nat() }),
    fc.record({
      op: fc.constant("extreme" as const),
      at: fc.nat(),
      v: fc.constantFrom(0x00, 0x7f, 0x80, 0xff, 0x20, 0x30, 0x37),
      n: fc.integer({ min: 1, max: 12 }),
    }),
  );
  return fc.array(edit, { minLength: 1, maxLength: maxEdits }).map((edits) => {
    let b = sample.slice();
    for (const e of edits) {
      const at = b.length === 0 ? 0 : e.at % (b.length + 1);
      switch (e.op) {
        case "flip":
          if (at < b.length) b[at] ^= 1 << e.bit;
          break;
        case "set":
          if (at < b.length) b[at] = e.v;
          break;
        case "extreme":
          b.fill(e.v, at, Math.min(b.length, at + e.n));
          break;
        case "insert": {
          const out = new Uint8Array(b.length + e.bytes.length);
          out.set(b.subarray(0, at));
          out.set(e.bytes, at);
          out.set(b.subarray(at), at + e.bytes.length);
          b = out;
          break;
        }
        case "delete": {
          const end = Math.min(b.length, at + e.n);
          const out = new Uint8Array(b.length - (end - at));
          out.set(b.subarray(0, at));
          out.set(b.subarray(end), at);
          b = out;
          break;
        }
        case "truncate":
          b = b.slice(0, at);
          break;
      }
    }
    return b;
  });
}

/** Mutations of a text sample, edited as UTF-8 bytes and decoded back (lossily). */
export function mutatedText(sample: string, maxEdits = 8): fc.Arbitrary<string> {
  return mutated(new TextEncoder().encode(sample), maxEdits).map((b) =>
    new TextDecoder().decode(b)
  );
}

/** Asserts `f()` finishes within `ms` (a hang shows up as a failed property, not a stuck run). */
export async function within<T>(ms: number, what: string, f: () => Promise<T> | T): Promise<T> {
  const t0 = performance.now();
  const r = await f();
  const took = performance.now() - t0;
  if (took > ms) throw new Error(`${what} took ${took.toFixed(0)} ms (limit ${ms} ms)`);
  return r;
}

/** `within` for synchronous work. */
export function withinSync<T>(ms: number, what: string, f: () => T): T {
  const t0 = performance.now();
  const r = f();
  const took = performance.now() - t0;
  if (took > ms) throw new Error(`${what} took ${took.toFixed(0)} ms (limit ${ms} ms)`);
  return r;
}

/** Fails unless `e` is an instance of one of `types` (a parser's own documented errors). */
export function expectOnly(e: unknown, ...types: (new (...a: never[]) => Error)[]): void {
  if (types.some((t) => e instanceof t)) return;
  throw new Error(`unexpected ${(e as Error)?.constructor?.name ?? typeof e}: ${e}`, { cause: e });
}

export { fc };

/** The input size of `assertLinear`'s largest run. */
export const LINEAR_BYTES = 1024 * 1024;

/** CPU time of this process in ms: unlike the wall clock, not stretched when another takes the core. */
function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/**
 * Fails when `f` grows faster than linearly in its input: on `make(chars)` for 1/256, 1/16 and
 * all of LINEAR_BYTES, the best of three CPU times may grow at most 64 × per 16 × more input
 * (linear is 16 ×, quadratic 256 ×). A ratio of CPU times, so a loaded machine does not fail
 * it, and it stops at the first step too slow (a quadratic parse fails at 64 KiB instead of
 * running for hours on 1 MiB). The long hunt (`deno task fuzz`, FUZZ_RUNS ≥ 10000) also holds
 * the largest input to FAST_MS.
 */
export async function assertLinear(
  what: string,
  make: (chars: number) => string,
  f: (input: string) => unknown,
): Promise<void> {
  const best = async (s: string) => {
    let min = Infinity;
    // one run too slow is enough to judge: a quadratic parse is not timed three times over
    for (let i = 0; i < 3 && (i === 0 || min <= FAST_MS); i++) {
      const t0 = cpuMs();
      await f(s);
      min = Math.min(min, cpuMs() - t0);
    }
    return min;
  };
  let prev: { chars: number; ms: number } | null = null;
  for (const size of [LINEAR_BYTES / 256, LINEAR_BYTES / 16, LINEAR_BYTES]) {
    const s = make(size);
    if (prev === null) await f(s); // warm-up: compiled code from the first timing on
    const ms = await best(s);
    // below half a millisecond the clock's and the scheduler's noise, not the parser, make the ratio
    if (prev !== null && ms / Math.max(prev.ms, 0.5) > 64) {
      throw new Error(
        `${what}: ${s.length} chars took ${ms.toFixed(1)} ms of CPU, ${prev.chars} took ${
          prev.ms.toFixed(1)
        } ms (linear would be 16 ×)`,
      );
    }
    prev = { chars: s.length, ms };
  }
  if (fuzzRuns() >= 10_000 && prev!.ms > FAST_MS) {
    throw new Error(
      `${what}: ${prev!.chars} chars took ${prev!.ms.toFixed(0)} ms of CPU (limit ${FAST_MS} ms)`,
    );
  }
}
