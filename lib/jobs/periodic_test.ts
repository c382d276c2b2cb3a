import assert from "node:assert/strict";
import { periodic } from "./periodic.ts";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

Deno.test("periodic: a run still going makes the next ticks skip, never overlap", async () => {
  let active = 0;
  let most = 0;
  let runs = 0;
  let release = () => {};
  const stop = periodic("test", 5, async () => {
    runs++;
    most = Math.max(most, ++active);
    if (runs === 1) await new Promise<void>((r) => release = r);
    active--;
  });
  await sleep(60);
  assert.equal(runs, 1); // a dozen ticks passed while the first run was held
  release();
  while (runs < 2) await sleep(5);
  stop();
  assert.equal(most, 1);
});

Deno.test("periodic: the signal stops it and reaches the running call", async () => {
  const ac = new AbortController();
  let seen: AbortSignal | null = null;
  let runs = 0;
  periodic("test", 5, async (signal) => {
    runs++;
    seen = signal;
    await sleep(1);
  }, { signal: ac.signal });
  await sleep(40);
  ac.abort();
  const after = runs;
  await sleep(40);
  assert.ok(after >= 1);
  assert.equal(runs, after);
  assert.equal(seen!.aborted, true);
});

Deno.test("periodic: immediate runs once at once; a failure does not stop the next run", async () => {
  let runs = 0;
  const stop = periodic("failing test task", 20, () => {
    runs++;
    return Promise.reject(new Error("boom"));
  }, { immediate: true });
  await sleep(0);
  assert.equal(runs, 1);
  await sleep(70);
  stop();
  assert.ok(runs >= 2, `runs ${runs}`);
});

Deno.test("periodic: jitter keeps each pause within everyMs × (1 ± jitter)", async () => {
  const at: number[] = [];
  const stop = periodic("test", 20, () => {
    at.push(performance.now());
    return Promise.resolve();
  }, { jitter: 0.5 });
  await sleep(200);
  stop();
  assert.ok(at.length >= 3, `ticks ${at.length}`);
  for (let i = 1; i < at.length; i++) {
    assert.ok(at[i] - at[i - 1] >= 9, `pause ${at[i] - at[i - 1]}`);
  }
});
