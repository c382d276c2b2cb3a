// A parse of untrusted bytes in a child Deno process (docs/design.md, "Untrusted content"): the
// child gets read access to its inputs, write access to its scratch folder, FFI where it needs
// the native decoders, no network, no environment and no subprocesses, and a V8 heap cap. This
// process watches its wall time, CPU time and resident memory (budget_watch.ts) and kills it the
// moment one passes its budget, so a hostile layer costs the serving process nothing but a few
// polls.
import type { SandboxBudget, SandboxMode } from "../config/mod.ts";
import { BudgetExceededError, SandboxError, SandboxUnavailableError } from "./errors.ts";
import { childCommand } from "./launch.ts";
import { BudgetWatch, type Passed } from "./budget_watch.ts";
import { concatBytes } from "../streams/mod.ts";
import { setPriority } from "node:os";

const SANDBOX_NICENESS = 10;

export interface SandboxSpec {
  /**
   * a child process (the default), or a worker of this process where there are no subprocesses
   * (lib/sandbox/worker.ts: the same budgets but CPU, and a heap cap in place of the RSS poll)
   */
  mode?: Exclude<SandboxMode, "off">;
  /** what the job is called in errors ("index", "scan") */
  label: string;
  /** the child's entry module (a file: URL beside this code) */
  module: URL;
  /** passed to the child as its one argument, JSON-encoded */
  args: unknown;
  /** granted to a child process; a worker has the serving process's permissions */
  readPaths?: string[];
  writePaths?: string[];
  /**
   * FFI, which the native decoders need. Deno checks pointer operations against the whole
   * grant, not a library path (`--allow-ffi=<lib>` fails at the first UnsafePointer), so this
   * is all or nothing; the child's code loads zlib and libzstd only.
   */
  ffi?: boolean;
  /** the child's standard input (closed when absent) */
  stdin?: ReadableStream<Uint8Array>;
  budget: SandboxBudget;
  /** the most the child may print as its result */
  maxOutputBytes?: number;
  signal?: AbortSignal;
}

const POLL_MS = 100;
const STDERR_KEEP = 8 * 1024;
export const DEFAULT_OUTPUT = 8 * 1024 * 1024;
/** Linux's USER_HZ, the unit of /proc/<pid>/stat's CPU times, is 100 on every platform Deno runs. */
const TICKS_PER_SEC = 100;

/** CPU seconds and resident bytes of `pid` (Linux), or null once it is gone. */
export async function processUsage(
  pid: number,
): Promise<{ cpuSecs: number; rssBytes: number } | null> {
  try {
    const stat = await Deno.readTextFile(`/proc/${pid}/stat`);
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const cpuSecs = (Number(f[11]) + Number(f[12])) / TICKS_PER_SEC;
    const status = await Deno.readTextFile(`/proc/${pid}/status`);
    const m = /VmRSS:\s+(\d+) kB/.exec(status);
    return { cpuSecs, rssBytes: m ? Number(m[1]) * 1024 : 0 };
  } catch {
    return null;
  }
}

const canPoll = (() => {
  let known: boolean | undefined;
  return () => {
    if (known === undefined) {
      try {
        known = Deno.build.os === "linux" && Deno.statSync("/proc/self/stat").isFile;
      } catch {
        known = false;
      }
    }
    return known;
  };
})();

/**
 * V8's heap stops a little below the memory budget so that an allocation storm ends in the
 * child's own out-of-memory abort, which names the budget, before the poll has to kill it.
 */
export function heapCapMiB(budget: SandboxBudget): number {
  return Math.max(32, Math.floor(budget.memoryBytes / 1024 / 1024 * 0.75));
}

/** Runs the child process to its end and returns what it printed on standard output. */
export async function runInProcess(spec: SandboxSpec): Promise<string> {
  const { budget } = spec;
  const heapMiB = heapCapMiB(budget);
  let child: Deno.ChildProcess;
  try {
    const c = childCommand({
      module: spec.module,
      args: spec.args,
      readPaths: spec.readPaths,
      writePaths: spec.writePaths,
      ffi: spec.ffi,
      v8Flags: [`--max-old-space-size=${heapMiB}`, "--max-semi-space-size=4"],
    });
    child = new Deno.Command(c.command, {
      args: c.args,
      clearEnv: true,
      env: c.env,
      stdin: spec.stdin ? "piped" : "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch (e) {
    await spec.stdin?.cancel().catch(() => {});
    throw new SandboxUnavailableError(
      `${spec.label}: no sandbox process could be started (${e instanceof Error ? e.message : e})`,
    );
  }
  // The parse gets what CPU the serving process leaves: on two cores a bomb's inflate at normal
  // priority held /healthz answers past a second under load.
  try {
    setPriority(child.pid, SANDBOX_NICENESS);
  } catch { /* not permitted here: same priority */ }

  const maxOut = spec.maxOutputBytes ?? DEFAULT_OUTPUT;
  // A budget passed or the job aborted kills the child.
  const watch = new BudgetWatch({
    budget,
    maxOutputBytes: maxOut,
    signal: spec.signal,
    stop: () => {
      try {
        child.kill("SIGKILL");
      } catch { /* already gone */ }
    },
  });
  watch.start(
    canPoll()
      ? {
        everyMs: POLL_MS,
        check: async (): Promise<Passed | null> => {
          const u = await processUsage(child.pid);
          if (!u) return null;
          if (u.rssBytes > budget.memoryBytes) {
            return { budget: "max_memory_bytes", reached: `${u.rssBytes} bytes` };
          }
          if (u.cpuSecs > budget.cpuSecs) {
            return { budget: "max_cpu_secs", reached: `${u.cpuSecs} s` };
          }
          return null;
        },
      }
      : undefined,
  );

  // Each chunk is written before the next is asked for, so a source may reuse a chunk's memory
  // once it is asked again (no copies). The child may stop reading at any point (a budget, the
  // end of the archive): the feed then ends quietly.
  const feed = async (src: ReadableStream<Uint8Array>) => {
    const w = child.stdin.getWriter();
    try {
      for await (const c of src) await w.write(c);
      await w.close();
    } catch {
      await w.abort().catch(() => {});
      await src.cancel().catch(() => {});
    }
  };
  const fed = spec.stdin ? feed(spec.stdin) : Promise.resolve();
  const out: Uint8Array[] = [];
  let outBytes = 0;
  const stdout = (async () => {
    for await (const c of child.stdout) {
      outBytes += c.length;
      if (outBytes > maxOut) {
        watch.trip("output", `over ${maxOut} bytes`);
        break;
      }
      out.push(c);
    }
  })().catch(() => {});
  let errTail = "";
  const stderr = (async () => {
    const dec = new TextDecoder();
    for await (const c of child.stderr) {
      errTail = (errTail + dec.decode(c, { stream: true })).slice(-STDERR_KEEP);
    }
  })().catch(() => {});

  let status: Deno.CommandStatus;
  try {
    status = await child.status;
  } finally {
    watch.end();
  }
  await Promise.all([stdout, stderr, fed]);
  if (watch.passed) throw watch.passed;
  spec.signal?.throwIfAborted();
  if (!status.success) {
    // V8 aborts on its heap cap ("Reached heap limit", "invalid size error"): that is the memory
    // budget, reached before the poll saw it.
    if (
      /heap limit|out of memory|invalid (array|string|table|size)|allocation failed/i.test(errTail)
    ) {
      throw new BudgetExceededError(
        "max_memory_bytes",
        budget.memoryBytes,
        `the ${heapMiB} MiB heap`,
      );
    }
    const last = errTail.trim().split("\n").slice(-3).join(" | ").slice(0, 500);
    // A signal this side did not send (the kernel's OOM killer, a stop from outside) says
    // nothing about the input: the work is retried (SandboxUnavailableError).
    if (status.signal && !/SIGSEGV|SIGBUS|SIGILL|SIGFPE|SIGABRT|SIGTRAP/.test(status.signal)) {
      throw new SandboxUnavailableError(
        `${spec.label} sandbox was ended by ${status.signal} from outside${
          last ? `: ${last}` : ""
        }`,
      );
    }
    throw new SandboxError(
      `${spec.label} sandbox died (${
        status.signal ? `signal ${status.signal}` : `exit ${status.code}`
      })${last ? `: ${last}` : ""}`,
    );
  }
  return new TextDecoder().decode(concatBytes(out, outBytes));
}
