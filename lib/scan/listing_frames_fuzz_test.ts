// Fuzzing the listings' framing as a sandbox child decodes it (listing_frames.ts): whatever bytes
// arrive, merging what they hold ends with a plan or an Error, in bounded time, never a hang.
import assert from "node:assert/strict";
import type { ListedEntry } from "../index/mod.ts";
import { encodeListings, openListings } from "./listing_frames.ts";
import { planImage } from "./scan_plan.ts";
import { FAST_MS, fc, fuzzParams, mutated, within } from "../../tests/helpers/fuzz.ts";

const entry = (path: string, kind = "file") =>
  ({ path, kind, size: 1, mode: 0o644, offset: 0 }) as unknown as ListedEntry;
const ndjson = (es: ListedEntry[]) =>
  new TextEncoder().encode(es.map((e) => JSON.stringify(e)).join("\n") + "\n");

async function framed(layers: ListedEntry[][]): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (
    const f of encodeListings([
      layers.map((es) => () => Promise.resolve(ReadableStream.from([ndjson(es)]))),
    ])
  ) parts.push(f.slice());
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) out.set(p, (at += p.length) - p.length);
  return out;
}

const SAMPLE = await framed([
  [entry("etc", "dir"), entry("var/lib/dpkg/status"), entry("usr/lib/os-release")],
  [entry("etc/os-release", "symlink"), entry("var/lib/dpkg/status.d/x")],
]);

async function check(bytes: Uint8Array, layers: number): Promise<void> {
  await within(FAST_MS, "planImage over framed listings", async () => {
    try {
      const plan = await planImage(
        openListings({ counts: [layers] }, () => ReadableStream.from([bytes]))[0],
        100,
      );
      assert.ok(Array.isArray(plan.files));
    } catch (e) {
      assert.ok(e instanceof Error, `threw ${e}`);
    }
  });
}

Deno.test("fuzz listing frames: mutated framed listings plan or fail, never hang", async () => {
  await fc.assert(
    fc.asyncProperty(mutated(SAMPLE, 12), fc.integer({ min: 0, max: 4 }), check),
    fuzzParams(),
  );
});

Deno.test("fuzz listing frames: random bytes plan or fail, never hang", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.uint8Array({ maxLength: 4096 }),
      fc.integer({ min: 0, max: 3 }),
      check,
    ),
    fuzzParams(),
  );
});
