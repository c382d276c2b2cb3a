// A private network namespace for the as-shipped tests: a loopback of its own and nothing else,
// so what runs in it is offline (no DNS, no route out) and its fixed ports (Wharf's default 5000)
// clash with nothing on the machine. A holder process keeps the namespace alive; every other
// command enters it with `nsenter`, and the test reaches servers in it through `curl` run there.
// Long-running commands each lead a process group of their own (setsid), so a stop reaches
// every process they started (`deno task` and its `deno run`, the server's sandbox children), as
// Ctrl+C in a terminal does.
import { isFile, missingReason, runs } from "./_tools.ts";

/** The tools a namespace needs, or [] when all are here. */
export function netnsMissingTools(): string[] {
  const missing: string[] = [];
  for (const [cmd, args] of [["unshare", ["--version"]], ["nsenter", ["--version"]]] as const) {
    if (!runs(cmd, [...args])) missing.push(cmd);
  }
  if (!runs("ip", ["-V"])) missing.push("ip (iproute2)");
  if (!runs("curl", ["--version"])) missing.push("curl");
  if (!runs("setsid", ["--version"])) missing.push("setsid");
  if (missing.length === 0 && Deno.uid() !== 0) missing.push("root (unshare -n)");
  return missing;
}

/** Why `suite` cannot run in a namespace (skip, or throw under WHARF_REQUIRE_TOOLS=1). */
export function netnsMissing(suite: string): string | null {
  return missingReason(suite, netnsMissingTools(), "apt-get install util-linux iproute2 curl");
}

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

export interface HttpAnswer {
  status: number;
  body: string;
  headers: Record<string, string>;
}

/** A long-running process in the namespace, leading its own process group. */
export interface NsProcess {
  pid: number;
  /** stdout and stderr as they came, interleaved */
  output(): string;
  /** resolves with the output once `re` matches it; rejects when the process exits first or
   * `timeoutMs` passes (the message carries the output) */
  waitFor(re: RegExp, timeoutMs: number): Promise<string>;
  /** signals the whole process group */
  signal(sig: Deno.Signal): void;
  /** the exit status of the group leader */
  status: Promise<Deno.CommandStatus>;
  /** SIGINT to the group (Ctrl+C), then SIGKILL after `graceMs`; resolves when the leader is gone
   * and every process of the group has been sent SIGKILL */
  stop(graceMs?: number): Promise<Deno.CommandStatus>;
}

export interface SpawnOptions {
  cwd?: string;
  env?: Record<string, string>;
  /** replace the environment instead of adding to it */
  clearEnv?: boolean;
}

export interface Netns {
  /** the holder's pid: `nsenter -t <pid> -n` enters the namespace */
  pid: number;
  /** argv that runs `cmd` inside the namespace */
  argv(cmd: string[]): string[];
  run(cmd: string[], opts?: SpawnOptions & { timeoutMs?: number }): Promise<Run>;
  spawn(cmd: string[], opts?: SpawnOptions): NsProcess;
  /** an HTTP request from inside the namespace (curl, 15 s at most) */
  http(
    url: string,
    init?: { method?: string; headers?: Record<string, string> },
  ): Promise<HttpAnswer>;
  /** stops what `spawn` started and still runs, then the holder */
  close(): Promise<void>;
}

const dec = new TextDecoder();

/** Opens a namespace with only `lo`, up. */
export async function openNetns(): Promise<Netns> {
  // The holder exits when its stdin closes: with this process, if the test dies.
  const holder = new Deno.Command("unshare", {
    args: ["--net", "--", "sh", "-c", "ip link set lo up && echo up && exec cat >/dev/null"],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const reader = holder.stdout.getReader();
  const first = await Promise.race([
    reader.read(),
    new Promise<null>((r) => setTimeout(() => r(null), 10_000)),
  ]);
  reader.releaseLock();
  const up = first !== null && !first.done && dec.decode(first.value).startsWith("up");
  const stdinWriter = holder.stdin.getWriter();
  const endHolder = async () => {
    await stdinWriter.close().catch(() => {});
    try {
      holder.kill("SIGKILL");
    } catch { /* gone */ }
    await holder.status;
    await holder.stdout.cancel().catch(() => {});
    await holder.stderr.cancel().catch(() => {});
  };
  if (!up) {
    const err = await new Response(holder.stderr).text().catch(() => "");
    await endHolder();
    throw new Error(`unshare --net did not bring lo up: ${err}`);
  }
  const pid = holder.pid;
  const argv = (cmd: string[]) => ["nsenter", "-t", String(pid), "-n", ...cmd];
  const started = new Set<NsProcess>();

  const run = async (cmd: string[], opts: SpawnOptions & { timeoutMs?: number } = {}) => {
    const [c, ...args] = argv(cmd);
    const o = await new Deno.Command(c, {
      args,
      cwd: opts.cwd,
      env: opts.env,
      clearEnv: opts.clearEnv,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      signal: AbortSignal.timeout(opts.timeoutMs ?? 60_000),
    }).output();
    return { code: o.code, stdout: dec.decode(o.stdout), stderr: dec.decode(o.stderr) };
  };

  const spawn = (cmd: string[], opts: SpawnOptions = {}): NsProcess => {
    // setsid: not a group leader when spawned from here, so it makes the group without a fork
    // and the pid is the leader's.
    const [c, ...args] = argv(["setsid", ...cmd]);
    const child = new Deno.Command(c, {
      args,
      cwd: opts.cwd,
      env: opts.env,
      clearEnv: opts.clearEnv,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    let out = "";
    const waiters = new Set<() => void>();
    const pump = async (s: ReadableStream<Uint8Array>) => {
      const d = new TextDecoder();
      for await (const chunk of s) {
        out += d.decode(chunk, { stream: true });
        for (const w of waiters) w();
      }
    };
    const pumps = Promise.all([pump(child.stdout), pump(child.stderr)]).catch(() => {});
    const status = child.status;
    let exited = false;
    status.then(() => {
      exited = true;
      for (const w of waiters) w();
    });
    const signal = (sig: Deno.Signal) => {
      try {
        Deno.kill(-child.pid, sig);
      } catch { /* the group is gone */ }
    };
    const proc: NsProcess = {
      pid: child.pid,
      output: () => out,
      status,
      signal,
      waitFor: (re, timeoutMs) =>
        new Promise((resolve, reject) => {
          const timer = setTimeout(() => {
            waiters.delete(check);
            reject(
              new Error(
                `no ${re} within ${timeoutMs} ms from ${cmd.join(" ")}:\n${out.slice(-4000)}`,
              ),
            );
          }, timeoutMs);
          const check = () => {
            if (re.test(out)) {
              clearTimeout(timer);
              waiters.delete(check);
              resolve(out);
            } else if (exited) {
              // the pipes may still hold the last lines: give them a moment
              pumps.then(() => {
                clearTimeout(timer);
                waiters.delete(check);
                if (re.test(out)) resolve(out);
                else {reject(
                    new Error(`${cmd.join(" ")} exited before ${re}:\n${out.slice(-4000)}`),
                  );}
              });
            }
          };
          waiters.add(check);
          check();
        }),
      stop: async (graceMs = 20_000) => {
        signal("SIGINT");
        const timer = setTimeout(() => signal("SIGKILL"), graceMs);
        const st = await status;
        clearTimeout(timer);
        // whatever the leader left behind in its group
        signal("SIGKILL");
        await pumps;
        started.delete(proc);
        return st;
      },
    };
    started.add(proc);
    return proc;
  };

  const http = async (
    url: string,
    init: { method?: string; headers?: Record<string, string> } = {},
  ): Promise<HttpAnswer> => {
    const args = ["curl", "-sS", "--max-time", "15", "-D", "/dev/stderr", "-o", "-"];
    if (init.method === "HEAD") args.push("-I");
    else if (init.method) args.push("-X", init.method);
    for (const [k, v] of Object.entries(init.headers ?? {})) args.push("-H", `${k}: ${v}`);
    args.push(url);
    const r = await run(args, { timeoutMs: 20_000 });
    if (r.code !== 0) return { status: 0, body: r.stderr, headers: {} };
    // The last header block (after any 100 Continue) is the answer's.
    const blocks = r.stderr.trim().split(/\r?\n\r?\n/);
    const lines = blocks[blocks.length - 1].split(/\r?\n/);
    const status = Number(/^HTTP\/\S+ (\d{3})/.exec(lines[0])?.[1] ?? 0);
    const headers: Record<string, string> = {};
    for (const l of lines.slice(1)) {
      const i = l.indexOf(":");
      if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
    }
    return { status, body: r.stdout, headers };
  };

  const close = async () => {
    await Promise.all([...started].map((p) => p.stop(5_000)));
    await endHolder();
  };

  return { pid, argv, run, spawn, http, close };
}

/**
 * GETs `url` from inside `ns` until it answers other than 202 (every 250 ms, `timeoutMs` at
 * most: the index and report endpoints' "still working"), which must be 200; returns its JSON.
 * A failure carries `log()` (the server's output).
 */
export async function pollJson(
  ns: Netns,
  url: string,
  timeoutMs: number,
  log: () => string,
  // deno-lint-ignore no-explicit-any
): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await ns.http(url);
    if (r.status !== 202) {
      if (r.status !== 200) {
        throw new Error(`GET ${url}: ${r.status} ${r.body}\n--- output ---\n${log().slice(-4000)}`);
      }
      return JSON.parse(r.body);
    }
    if (Date.now() > deadline) {
      throw new Error(
        `GET ${url}: still 202 after ${timeoutMs} ms\n--- output ---\n${log().slice(-4000)}`,
      );
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** A chromium executable that runs inside `ns` (playwright-core's `executablePath`): a shell
 * script in `dir` that enters the namespace and execs `chromium` there, keeping the pipes
 * playwright drives it through. */
export async function chromiumIn(ns: Netns, dir: string, chromium: string): Promise<string> {
  if (!isFile(chromium)) throw new Error(`no ${chromium}`);
  const path = `${dir}/chromium-in-netns`;
  await Deno.writeTextFile(
    path,
    `#!/bin/sh\nexec ${ns.argv([chromium]).join(" ")} "$@"\n`,
  );
  await Deno.chmod(path, 0o755);
  return path;
}
