import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

const MiB = 1024 * 1024;
const PROBE = fileURLToPath(new URL("../../tests/helpers/blob_memory_probe.ts", import.meta.url));

async function probe(mib: number): Promise<{ bytes: number; growthBytes: number }> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", PROBE, String(mib)],
    env: { RUST_BACKTRACE: "0", NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  assert.ok(out.success, `probe failed: ${new TextDecoder().decode(out.stderr)}`);
  return JSON.parse(text.trim().split("\n").at(-1)!);
}

Deno.test("a 64 MiB blob streams through getBlob and verifyDigest with flat memory", async () => {
  const { bytes, growthBytes } = await probe(64);
  assert.equal(bytes, 64 * MiB);
  console.log(`rss growth while streaming 64 MiB: ${(growthBytes / MiB).toFixed(1)} MiB`);
  assert.ok(growthBytes < 16 * MiB, `rss grew ${(growthBytes / MiB).toFixed(1)} MiB`);
});
