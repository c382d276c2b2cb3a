// The same child modules under both sandboxes (a process, a worker of this process) end the same
// way: results, the wall, CPU, memory and output budgets, a thrown error, a crash.
import assert from "node:assert/strict";
import type { SandboxBudget } from "../config/mod.ts";
import {
  BudgetExceededError,
  ChildError,
  runSandboxedJson,
  SandboxError,
  type SandboxSpec,
} from "./mod.ts";
import { workerKind } from "./worker.ts";

const FIXTURES = new URL("../../tests/fixtures/sandbox_children/", import.meta.url);
const MODES = ["process", "worker"] as const;
const BUDGET: SandboxBudget = { wallSecs: 60, cpuSecs: 60, memoryBytes: 512 * 1024 ** 2 };

function spec(mode: typeof MODES[number], name: string, more: Partial<SandboxSpec> = {}) {
  return {
    mode,
    label: "test",
    module: new URL(`${name}.ts`, FIXTURES),
    args: null,
    budget: BUDGET,
    ...more,
  } satisfies SandboxSpec;
}

async function budgetTrip(p: Promise<unknown>, budget: string): Promise<BudgetExceededError> {
  const e = await p.then(() => assert.fail(`no ${budget} trip`), (e) => e);
  assert.ok(e instanceof BudgetExceededError, String(e));
  assert.equal(e.budget, budget, e.message);
  return e;
}

/** A stream of `n` chunks of `size` bytes that reuses one buffer, as the store's readers may. */
function chunks(
  n: number,
  size: number,
  seen?: { read: number; cancelled: boolean },
): ReadableStream<Uint8Array> {
  const buf = new Uint8Array(size);
  let i = 0;
  return new ReadableStream({
    pull(c) {
      if (i === n) return c.close();
      buf.fill(i++ & 0xff);
      if (seen) seen.read = i;
      c.enqueue(buf);
    },
    cancel() {
      if (seen) seen.cancelled = true;
    },
  }, { highWaterMark: 0 });
}

for (const mode of MODES) {
  Deno.test(`sandbox ${mode}: input and argument in, the result back`, async () => {
    const r = await runSandboxedJson<{ length: number; chunks: number; args: unknown }>(
      spec(mode, "echo_length", {
        args: { layer: "sha256:ab", n: 3, skip: undefined },
        stdin: chunks(64, 256 * 1024),
      }),
    );
    assert.equal(r.length, 64 * 256 * 1024);
    assert.deepEqual(r.args, { layer: "sha256:ab", n: 3 });
  });

  Deno.test(`sandbox ${mode}: no input is an empty input`, async () => {
    const r = await runSandboxedJson<{ length: number }>(spec(mode, "echo_length"));
    assert.equal(r.length, 0);
  });

  Deno.test(`sandbox ${mode}: a child that never ends is stopped at max_wall_secs`, async () => {
    const t = performance.now();
    const e = await budgetTrip(
      runSandboxedJson(spec(mode, "loop", { budget: { ...BUDGET, wallSecs: 2 } })),
      "max_wall_secs",
    );
    // The wall budget is a timer: stopped soon after it, however loaded the machine (the slack
    // is for a loaded CI machine, not a speed target).
    const secs = (performance.now() - t) / 1000;
    assert.ok(secs >= 2 && secs < 15, `stopped after ${secs} s`);
    assert.match(e.message, /max_wall_secs \(2\)/);
  });

  Deno.test(`sandbox ${mode}: a result past the output budget`, async () => {
    await budgetTrip(
      runSandboxedJson(spec(mode, "print_much", { args: { bytes: 300_000 }, maxOutputBytes: 1e5 })),
      "output",
    );
    const ok = await runSandboxedJson<string>(
      spec(mode, "print_much", { args: { bytes: 1000 }, maxOutputBytes: 1e5 }),
    );
    assert.equal(ok.length, 1000);
  });

  Deno.test(`sandbox ${mode}: an error the child throws is a ChildError`, async () => {
    const e = await runSandboxedJson(spec(mode, "throws")).catch((e) => e);
    assert.ok(e instanceof ChildError, String(e));
    assert.equal(e.message, "bad data at byte 7");
    assert.equal(e.permanent, true);
  });

  Deno.test(`sandbox ${mode}: a child that dies without a line is a SandboxError`, async () => {
    const e = await runSandboxedJson(spec(mode, "crash")).catch((e) => e);
    assert.ok(e instanceof SandboxError, String(e));
    assert.match(e.message, /test sandbox (worker )?died \(exit 3\)/);
  });

  Deno.test(`sandbox ${mode}: 1 GiB of arrays under a 128 MiB budget: max_memory_bytes`, async () => {
    const t = performance.now();
    await budgetTrip(
      runSandboxedJson(
        spec(mode, "alloc", {
          args: { gib: 1 },
          budget: { ...BUDGET, memoryBytes: 128 * 1024 ** 2 },
        }),
      ),
      "max_memory_bytes",
    );
    assert.ok(performance.now() - t < 30_000);
  });

  Deno.test(`sandbox ${mode}: ArrayBuffers past the budget: max_memory_bytes`, async () => {
    const e = await budgetTrip(
      runSandboxedJson(
        spec(mode, "alloc_buffers", {
          args: { gib: 1 },
          budget: { ...BUDGET, memoryBytes: 256 * 1024 ** 2 },
        }),
      ),
      "max_memory_bytes",
    );
    assert.match(e.reached, /^\d+ bytes$/);
  });

  Deno.test(`sandbox ${mode}: a child past max_cpu_secs`, async () => {
    const t = performance.now();
    await budgetTrip(
      runSandboxedJson(spec(mode, "loop", { budget: { ...BUDGET, cpuSecs: 1 } })),
      "max_cpu_secs",
    );
    // CPU seconds, not wall: a low-priority child on a busy machine takes longer to use them.
    assert.ok(performance.now() - t >= 1000);
  });

  Deno.test(`sandbox ${mode}: a stopped child stops its input`, async () => {
    const seen = { read: 0, cancelled: false };
    const src = chunks(1_000_000, 64 * 1024, seen);
    await budgetTrip(
      runSandboxedJson(spec(mode, "loop", { stdin: src, budget: { ...BUDGET, wallSecs: 1 } })),
      "max_wall_secs",
    );
    // A process's pipe buffers some; a worker asked for nothing.
    assert.ok(seen.read < 64, `${seen.read} chunks read`);
    assert.ok(seen.cancelled, "the source is cancelled, not left open");
  });
}

Deno.test("sandbox worker: an aborted job ends at once", async () => {
  const ac = new AbortController();
  setTimeout(() => ac.abort(new Error("job lease lost")), 300);
  const t = performance.now();
  await assert.rejects(runSandboxedJson(spec("worker", "loop", { signal: ac.signal })), /lease/);
  // The loop runs until its wall budget (60 s) unless the abort ends it.
  assert.ok(performance.now() - t < 15_000);
});

// Where node:worker_threads is missing, a web Worker runs the child: no heap cap, but the same
// transport and the same wall, output and self-reported memory budgets.
Deno.test("sandbox worker (web Worker fallback): results and budgets", async () => {
  workerKind.value = "web";
  try {
    const r = await runSandboxedJson<{ length: number }>(
      spec("worker", "echo_length", { stdin: chunks(10, 1000) }),
    );
    assert.equal(r.length, 10_000);
    await budgetTrip(
      runSandboxedJson(spec("worker", "loop", { budget: { ...BUDGET, wallSecs: 1 } })),
      "max_wall_secs",
    );
    await budgetTrip(
      runSandboxedJson(spec("worker", "print_much", { args: { bytes: 2e5 }, maxOutputBytes: 1e5 })),
      "output",
    );
    assert.ok(
      await runSandboxedJson(spec("worker", "throws")).catch((e) => e) instanceof ChildError,
    );
    await budgetTrip(
      runSandboxedJson(
        spec("worker", "alloc_buffers", {
          args: { gib: 1 },
          budget: { ...BUDGET, memoryBytes: 256 * 1024 ** 2 },
        }),
      ),
      "max_memory_bytes",
    );
  } finally {
    workerKind.value = null;
  }
});
