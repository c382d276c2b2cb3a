// The cache cap's hold (issue 26 part 2): KV operations per pull of a cached image (manifest GET
// by tag and both blob GETs) of a capped pull-through repository beside an uncapped one, and what
// a blob stream that outlasts a third of the hold adds (its renewals). Counted from
// wharf_kv_operation_duration_seconds_count (every KV call the server makes), minus what reading
// /metrics itself costs. Counts, not timings: the machine's load does not change them.
//
// Run: deno run -A --unstable-kv bench/cache_hold_kv.ts
import { FakeRegistry } from "../tests/helpers/fake_registry.ts";
import { startServer, type TestServer } from "../tests/helpers/server.ts";
import { addImage, cacheConfig, pull, sleep } from "../tests/api/_cache_images.ts";

const PULLS = 20;
const HOLD_MS = 1500; // the servers' test-only hold (commands/test_env.ts): renewals every 500 ms
const STREAM_MS = 6 * HOLD_MS;

async function kvOps(s: TestServer): Promise<number> {
  const t = await (await fetch(`${s.url}/metrics`)).text();
  let sum = 0;
  for (const line of t.split("\n")) {
    if (line.startsWith("wharf_kv_operation_duration_seconds_count")) {
      sum += Number(line.split(" ").pop());
    }
  }
  return sum;
}

/** KV operations `fn` costs the server (background writes given `settleMs` to land). */
async function counted(s: TestServer, fn: () => Promise<void>, settleMs = 300): Promise<number> {
  const a = await kvOps(s);
  const b = await kvOps(s);
  const perRead = b - a;
  await fn();
  await sleep(settleMs);
  return await kvOps(s) - b - perRead;
}

const up = await FakeRegistry.start();
try {
  const rows: string[] = [];
  const streamed: number[] = []; // per side: slow fill's ops minus the fast one's
  for (const capped of [false, true]) {
    const s = await startServer({
      config: capped
        ? cacheConfig(up, 1 << 30)
        : `[[repository."hub".upstream]]\nurl = "${up.url}"\n`,
      unchecked: true,
      env: { WHARF_TEST_CACHE_HOLD_MS: String(HOLD_MS) },
    });
    try {
      const img = await addImage(up, `library/warm-${capped}`);
      await pull(s, img);
      await sleep(500);
      const perPull = await counted(s, async () => {
        for (let i = 0; i < PULLS; i++) await pull(s, img);
      }) / PULLS;
      // Two equal fills, one fast, one trickled over STREAM_MS: the difference is the renewals.
      const fast = await addImage(up, `library/fast-${capped}`);
      const slow = await addImage(up, `library/slow-${capped}`);
      up.fault(
        { method: "GET", path: `/v2/library/slow-${capped}/blobs/${slow.blobs[1].digest}` },
        {
          trickleMs: Math.ceil(STREAM_MS / Math.ceil(slow.blobs[1].bytes.length / 256)),
          chunkBytes: 256,
        },
      );
      const fastOps = await counted(s, () => pull(s, fast), 1000);
      const slowOps = await counted(s, () => pull(s, slow), 1000);
      streamed.push(slowOps - fastOps);
      rows.push(
        `| ${capped ? "capped" : "uncapped"} | ${perPull.toFixed(2)} | ${fastOps} | ${slowOps} |`,
      );
    } finally {
      await s.stop();
      await Deno.remove(s.dataDir, { recursive: true }).catch(() => {});
    }
  }
  console.log(
    `| repository | KV ops / cached pull | fill, fast | fill, streamed over ${STREAM_MS} ms |`,
  );
  console.log("|---|---|---|---|");
  for (const r of rows) console.log(r);
  // A long fill costs more uncapped too (job leases and polls meanwhile): only the capped
  // side's extra over the uncapped side's is the renewals'.
  const renewals = Math.floor(STREAM_MS / (HOLD_MS / 3));
  console.log(
    `KV ops per renewal (every ${HOLD_MS / 3} ms while a blob streams): ${
      ((streamed[1] - streamed[0]) / renewals).toFixed(2)
    }`,
  );
} finally {
  await up.close();
}
