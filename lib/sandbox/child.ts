// The child's side of a sandboxed parse: its argument in, one JSON line out. A failure the
// child can name (a budget it counts itself, the data's own fault) is a line too; anything that
// kills it is judged by the parent from its exit.
//
// The same entry module runs as a process (argument in Deno.args[0], input on stdin, the line on
// stdout) or as a worker (lib/sandbox/worker.ts: argument, input and line by messages). Only this
// file knows which, so an entry module reads `childArgs()` and `childInput()` and returns its
// result from `main` either way.
import { BudgetExceededError } from "./errors.ts";
import type { ToChild, ToParent } from "./worker_protocol.ts";

/** The line the parent reads: `{ok}` or `{error, budget?, limit?, reached?, permanent?}`. */
export type ChildLine =
  | { ok: unknown }
  | { error: string; budget?: string; limit?: number; reached?: string; permanent?: boolean };

interface Port {
  post(m: ToParent, transfer?: ArrayBuffer[]): void;
  listen(f: (m: ToChild) => void): void;
}

/**
 * A process's main thread has no `postMessage`; a web worker and a node:worker_threads worker
 * both do (Deno.args is empty in both, and `import.meta.main` is true in all three, so neither
 * tells them apart).
 */
const inWorker = "postMessage" in globalThis;

let port: Promise<Port> | null = null;

/** The channel to the parent: node:worker_threads' parentPort, else the web worker's scope. */
function workerPort(): Promise<Port> {
  port ??= (async () => {
    const wt = await import("node:worker_threads");
    if (!wt.isMainThread && wt.parentPort) {
      const p = wt.parentPort;
      return {
        post: (m, transfer) => p.postMessage(m, transfer ?? []),
        listen: (f) => p.on("message", f),
      };
    }
    const scope = globalThis as unknown as {
      postMessage(m: unknown, transfer: Transferable[]): void;
      addEventListener(type: "message", f: (e: MessageEvent) => void): void;
    };
    return {
      post: (m, transfer) => scope.postMessage(m, transfer ?? []),
      listen: (f) => scope.addEventListener("message", (e) => f(e.data)),
    };
  })();
  return port;
}

/** What the parent sent with its first message (worker only). */
let init: Extract<ToChild, { init: unknown }>["init"] | null = null;
/** Waiters for input messages, in the order they were asked (one at a time: see childInput). */
let onInput: ((m: ToChild) => void) | null = null;

/**
 * The worker says hello and gets its argument and budgets back: the parent sends nothing the
 * worker did not ask for, so nothing is posted before this module listens.
 */
async function handshake(): Promise<void> {
  const p = await workerPort();
  const got = new Promise<void>((resolve) => {
    p.listen((m) => {
      if ("init" in m) {
        init = m.init;
        resolve();
      } else onInput?.(m);
    });
  });
  p.post({ hello: true });
  await got;
}

export function childArgs<T>(): T {
  if (inWorker) {
    if (!init) throw new Error("childArgs() before childMain started");
    return init.args as T;
  }
  // The argument is the last one whether the runtime ran this module (`deno run <module> <arg>`)
  // or main.ts's sandbox entry did (`wharf __sandbox-child <module> <arg>`, lib/sandbox/launch.ts).
  return JSON.parse(Deno.args[Deno.args.length - 1] ?? "null") as T;
}

/**
 * The child's input: standard input in a process; in a worker, one chunk asked of the parent at
 * a time, so however large the input, at most a couple of chunks wait on this side.
 */
export function childInput(): ReadableStream<Uint8Array> {
  if (!inWorker) return Deno.stdin.readable;
  let ended = false;
  return new ReadableStream<Uint8Array>({
    async pull(c) {
      if (ended) return;
      const p = await workerPort();
      const m = await new Promise<ToChild>((resolve) => {
        onInput = resolve;
        p.post({ pull: true });
      });
      onInput = null;
      if ("chunk" in m) c.enqueue(m.chunk);
      else if ("inputError" in m) {
        ended = true;
        c.error(new Error(`input failed: ${m.inputError}`));
      } else {
        ended = true;
        c.close();
      }
    },
    async cancel() {
      ended = true;
      (await workerPort()).post({ cancel: true });
    },
  }, { highWaterMark: 2 });
}

function lineOf(result: { ok: unknown } | { e: unknown }): ChildLine {
  if ("ok" in result) return { ok: result.ok };
  const e = result.e;
  return e instanceof BudgetExceededError
    ? { error: e.message, budget: e.budget, limit: e.limit, reached: e.reached }
    : {
      error: e instanceof Error ? e.message || e.name : String(e),
      permanent: (e as { permanent?: unknown })?.permanent === true,
    };
}

/**
 * Memory, seen from inside: every 100 ms while the event loop turns, the heap and ArrayBuffers
 * go to the parent, which stops the worker past max_memory_bytes. The heap is stopped short of
 * its V8 cap here, because a worker that reaches the cap inside a task is ended or left stuck
 * by Deno rather than reported (worker.ts). A synchronous loop is not seen here; the cap, the
 * CPU budget and the wall budget cover that.
 */
function watchMemory(p: Port, limits: { memoryBytes: number; heapBytes: number }): () => void {
  const t = setInterval(() => {
    const m = Deno.memoryUsage();
    const used = m.heapUsed + m.external;
    const over = used > limits.memoryBytes || m.heapUsed > limits.heapBytes * 0.9;
    p.post(over ? { memory: used, over: true } : { memory: used });
  }, 100);
  return () => clearInterval(t);
}

/** Runs `main` and hands its result (or its error) to the parent as the child's one line. */
export async function childMain(main: () => Promise<unknown>): Promise<void> {
  if (inWorker) {
    await handshake();
    const p = await workerPort();
    const stop = watchMemory(p, init!);
    let result: { ok: unknown } | { e: unknown };
    try {
      result = { ok: await main() };
    } catch (e) {
      result = { e };
    }
    stop();
    const bytes = new TextEncoder().encode(JSON.stringify(lineOf(result)) + "\n");
    // The parent checks the size too; this spares it a copy of a line it would refuse.
    if (bytes.length > init!.maxOutputBytes) p.post({ overflow: bytes.length });
    else p.post({ line: bytes }, [bytes.buffer as ArrayBuffer]);
    // The parent terminates the worker once it has the line: nothing to exit here.
    return;
  }
  // A terminal's Ctrl+C reaches the whole process group: the parent stops gracefully and lets
  // running jobs finish, so its children must outlive the same SIGINT (the parent's budgets and
  // its SIGKILL still end them).
  try {
    Deno.addSignalListener("SIGINT", () => {});
  } catch { /* no signals here (Windows): nothing to ignore */ }
  let result: { ok: unknown } | { e: unknown };
  try {
    result = { ok: await main() };
  } catch (e) {
    result = { e };
  }
  const bytes = new TextEncoder().encode(JSON.stringify(lineOf(result)) + "\n");
  for (let at = 0; at < bytes.length;) at += await Deno.stdout.write(bytes.subarray(at));
  Deno.exit(0);
}
