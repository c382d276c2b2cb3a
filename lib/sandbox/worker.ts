// A parse of untrusted bytes in a worker of this process, for runtimes without subprocesses
// (Deno Deploy). The child entry module is the one a process would run (child.ts carries the
// difference). The worker is stopped at once (terminate()) when it passes its wall-time or
// output budget or when the job is aborted, as a process would be killed.
//
// What a worker cannot give, and a process does:
// - memory: the worker shares this process. Its V8 heap is capped through node:worker_threads'
//   `resourceLimits` (Deno 2.9 honours maxOldGenerationSizeMb and ends only the worker, with
//   ERR_WORKER_OUT_OF_MEMORY; a web Worker has no such option, and its heap limit is the
//   process's, whose overrun aborts the whole process). ArrayBuffers are outside that cap: the
//   worker reports its heap plus ArrayBuffers every 100 ms while its event loop turns, and is
//   stopped past max_memory_bytes. A V8 fatal error other than the heap limit ("invalid size",
//   a string or array past V8's maximum length) still ends the whole process.
// - CPU time: node:worker_threads' cpuUsage() gives the thread's, polled like a process's (a web
//   Worker gives none: there max_wall_secs bounds it).
// - permissions: a worker has this process's permissions, not the child's narrow grant.
import { SandboxError, SandboxUnavailableError } from "./errors.ts";
import { DEFAULT_OUTPUT, heapCapMiB, type SandboxSpec } from "./process.ts";
import { BudgetWatch } from "./budget_watch.ts";
import type { ToChild, ToParent } from "./worker_protocol.ts";

interface Events {
  message(m: ToParent): void;
  error(e: { message: string; outOfMemory: boolean }): void;
  /** the worker ended without being terminated from here */
  exit(code: number): void;
}

interface Handle {
  post(m: ToChild, transfer?: ArrayBuffer[]): void;
  terminate(): Promise<void>;
  /** the worker thread's CPU seconds (node:worker_threads only) */
  cpuSecs?: () => Promise<number>;
}

type Kind = "node" | "web";

/** Which worker to start; tests force "web" to check the fallback. */
export const workerKind: { value: Kind | null } = { value: null };

async function startNode(module: URL, heapMiB: number, on: Events): Promise<Handle> {
  const { Worker } = await import("node:worker_threads");
  const w = new Worker(module, { resourceLimits: { maxOldGenerationSizeMb: heapMiB } });
  w.on("message", (m: ToParent) => on.message(m));
  w.on("error", (e: Error & { code?: string }) =>
    on.error({
      message: e.message || String(e),
      outOfMemory: e.code === "ERR_WORKER_OUT_OF_MEMORY",
    }));
  w.on("exit", (code: number) => on.exit(code));
  return {
    post: (m, transfer) => w.postMessage(m, transfer ?? []),
    terminate: async () => {
      await w.terminate();
    },
    cpuSecs: async () => {
      const u = await w.cpuUsage();
      return (u.user + u.system) / 1e6;
    },
  };
}

function startWeb(module: URL, on: Events): Handle {
  const w = new Worker(module.href, { type: "module" });
  w.onmessage = (e: MessageEvent<ToParent>) => on.message(e.data);
  w.onerror = (e: ErrorEvent) => {
    // Unhandled, a worker's error is rethrown in this thread and ends the process.
    e.preventDefault();
    on.error({ message: e.message, outOfMemory: false });
  };
  w.onmessageerror = () => on.error({ message: "a message could not be read", outOfMemory: false });
  return {
    post: (m, transfer) => w.postMessage(m, transfer ?? []),
    terminate: () => Promise.resolve(w.terminate()),
  };
}

async function start(module: URL, heapMiB: number, on: Events): Promise<Handle> {
  if (workerKind.value === "web") return startWeb(module, on);
  try {
    return await startNode(module, heapMiB, on);
  } catch (e) {
    if (workerKind.value === "node") throw e;
    return startWeb(module, on);
  }
}

type Outcome = { text: string } | { error: Error } | { aborted: true };

const POLL_MS = 250;
/**
 * A worker whose heap reaches its cap inside a task is not always reported by Deno 2.9: it can
 * be left stuck, its event loop dead and its thread idle, holding its heap. Neither a message
 * (the memory report comes every 100 ms) nor CPU for this long, after it started, means that.
 */
const STUCK_MS = 2000;

/** Runs the child as a worker to its end and returns its line. */
export async function runInWorker(spec: SandboxSpec): Promise<string> {
  const { budget } = spec;
  const heapMiB = heapCapMiB(budget);
  const maxOut = spec.maxOutputBytes ?? DEFAULT_OUTPUT;

  let settle!: (o: Outcome) => void;
  const outcome = new Promise<Outcome>((r) => settle = r);
  let finished = false;
  const finish = (o: Outcome) => {
    if (finished) return;
    finished = true;
    settle(o);
  };
  // A budget passed ends the run with its error, the job's abort as aborted (budget_watch.ts).
  const watch = new BudgetWatch({
    budget,
    maxOutputBytes: maxOut,
    signal: spec.signal,
    stop: (why) => finish(why ? { error: why } : { aborted: true }),
  });

  const reader = spec.stdin?.getReader();
  let inputDone = !reader;
  let handle: Handle | null = null;
  let lastHeard = 0;
  // Requests are answered in order, one read at a time.
  let serving = Promise.resolve();
  const serveChunk = async () => {
    if (!handle || finished) return;
    if (inputDone || !reader) return handle.post({ end: true });
    try {
      const { value, done } = await reader.read();
      if (finished) return;
      if (done) {
        inputDone = true;
        return handle.post({ end: true });
      }
      // A copy the worker owns: the source may reuse its chunk once asked again, and a view
      // posted as it is would clone the whole buffer under it.
      const own = value.slice();
      handle.post({ chunk: own }, [own.buffer]);
    } catch (e) {
      inputDone = true;
      if (!finished) handle.post({ inputError: e instanceof Error ? e.message : String(e) });
    }
  };

  const outputTrip = (reached: string) => watch.trip("output", reached);
  const events: Events = {
    message(m) {
      if (finished) return;
      lastHeard = Date.now();
      if ("hello" in m) {
        // The same argument a process gets, through JSON: nothing but data crosses.
        const args = JSON.parse(JSON.stringify(spec.args ?? null));
        handle?.post({
          init: {
            args,
            maxOutputBytes: maxOut,
            memoryBytes: budget.memoryBytes,
            heapBytes: heapMiB * 1024 * 1024,
          },
        });
      } else if ("pull" in m) {
        serving = serving.then(serveChunk);
      } else if ("cancel" in m) {
        inputDone = true;
        reader?.cancel().catch(() => {});
      } else if ("memory" in m) {
        if (m.over) watch.trip("max_memory_bytes", `${m.memory} bytes`);
      } else if ("overflow" in m) {
        outputTrip(`${m.overflow} bytes`);
      } else if ("line" in m) {
        if (m.line.byteLength > maxOut) outputTrip(`${m.line.byteLength} bytes`);
        else finish({ text: new TextDecoder().decode(m.line) });
      }
    },
    error(e) {
      if (e.outOfMemory) watch.trip("max_memory_bytes", `the ${heapMiB} MiB heap`);
      else {
        finish({
          error: new SandboxError(`${spec.label} sandbox worker died: ${e.message.slice(0, 500)}`),
        });
      }
    },
    exit(code) {
      // A line posted just before an exit may still be on its way.
      setTimeout(
        () =>
          finish({ error: new SandboxError(`${spec.label} sandbox worker died (exit ${code})`) }),
        100,
      );
    },
  };

  try {
    handle = await start(spec.module, heapMiB, events);
  } catch (e) {
    await reader?.cancel().catch(() => {});
    throw new SandboxUnavailableError(
      `${spec.label}: no sandbox worker could be started (${e instanceof Error ? e.message : e})`,
    );
  }
  let cpu = NaN;
  let cpuChanged = Date.now();
  const cpuSecs = handle.cpuSecs;
  watch.start(
    cpuSecs
      ? {
        everyMs: POLL_MS,
        check: async () => {
          if (finished) return null;
          const now = Date.now();
          const c = await cpuSecs();
          if (c !== cpu) cpuChanged = now;
          cpu = c;
          if (c > budget.cpuSecs) return { budget: "max_cpu_secs", reached: `${c.toFixed(2)} s` };
          if (lastHeard > 0 && now - lastHeard > STUCK_MS && now - cpuChanged > STUCK_MS) {
            return { budget: "max_memory_bytes", reached: `the ${heapMiB} MiB heap` };
          }
          return null;
        },
      }
      : undefined,
  );
  if (spec.signal?.aborted) finish({ aborted: true });

  const o = await outcome;
  watch.end();
  // The worker never ends on its own: it is stopped here whatever the outcome.
  await handle.terminate().catch(() => {});
  // Cancelled first: a read still waiting on a slow store then ends at once.
  if (!inputDone) await reader?.cancel().catch(() => {});
  await serving.catch(() => {});
  if ("aborted" in o) {
    spec.signal!.throwIfAborted();
    throw new SandboxError(`${spec.label} sandbox aborted`);
  }
  if ("error" in o) throw o.error;
  return o.text;
}
