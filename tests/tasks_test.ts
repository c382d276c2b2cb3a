// Each task in deno.json that starts Wharf runs, started as a user starts it: `deno task <name>`
// itself, with the task's permission set and nothing more. `start` serves (its startup line names
// the sandbox process, which needs the set's run access), `worker` drains the queues, `scrub`
// prints its summary, `hash-password` prints an argon2id hash of standard input, and `wharf`
// runs any command. A server started without run access refuses to start, naming the flag.
import assert from "node:assert/strict";
import { join } from "node:path";
import { verify } from "@node-rs/argon2";
import { serverTestOpts } from "./helpers/api.ts";
import { projectTasks, ROOT } from "./helpers/launch.ts";

const dec = new TextDecoder();
/** The tasks this file runs: a new task that starts Wharf gets a test here. */
const TESTED = ["hash-password", "scrub", "start", "wharf", "worker"];

interface Running {
  child: Deno.ChildProcess;
  /** stdout and stderr so far */
  output(): string;
  /** resolves when `re` appears in the output (rejects when the task exits first) */
  until(re: RegExp, ms?: number): Promise<RegExpExecArray>;
  /** SIGTERM to `deno task` (which passes it on), then its exit code and all its output */
  stop(): Promise<{ code: number; out: string }>;
}

/** `deno task <args…>` in the project root, as a user types it. */
function task(args: string[], stdin: "null" | "piped" = "null"): Deno.Command {
  return new Deno.Command(Deno.execPath(), {
    args: ["task", ...args],
    cwd: ROOT,
    env: { NO_COLOR: "1", RUST_BACKTRACE: "0" },
    stdin,
    stdout: "piped",
    stderr: "piped",
  });
}

/** The processes under `pid` (deno task's `deno run`), for cleanup if the stop fails. */
function descendants(pid: number): number[] {
  try {
    const kids = Deno.readTextFileSync(`/proc/${pid}/task/${pid}/children`).trim().split(/\s+/)
      .filter(Boolean).map(Number);
    return kids.flatMap((k) => [k, ...descendants(k)]);
  } catch {
    return [];
  }
}

function spawnTask(args: string[]): Running {
  const child = task(args).spawn();
  let out = "";
  const waiters = new Set<() => void>();
  const pump = async (s: ReadableStream<Uint8Array>) => {
    for await (const c of s) {
      out += dec.decode(c, { stream: true });
      for (const w of waiters) w();
    }
  };
  const pumps = Promise.all([pump(child.stdout), pump(child.stderr)]);
  let exited = false;
  const status = child.status.then(async (s) => {
    await pumps;
    exited = true;
    for (const w of waiters) w();
    return s;
  });
  return {
    child,
    output: () => out,
    until: (re, ms = 60_000) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => done(new Error(`no ${re} in ${ms} ms:\n${out}`)), ms);
        const done = (e?: Error, m?: RegExpExecArray) => {
          clearTimeout(timer);
          waiters.delete(check);
          if (e) reject(e);
          else resolve(m!);
        };
        const check = () => {
          const m = re.exec(out);
          if (m) done(undefined, m);
          else if (exited) done(new Error(`the task exited without ${re}:\n${out}`));
        };
        waiters.add(check);
        check();
      }),
    async stop() {
      const below = descendants(child.pid);
      try {
        child.kill("SIGTERM");
      } catch { /* already gone */ }
      const timer = setTimeout(() => {
        for (const pid of [child.pid, ...below]) {
          try {
            Deno.kill(pid, "SIGKILL");
          } catch { /* gone */ }
        }
      }, 30_000);
      const s = await status;
      clearTimeout(timer);
      return { code: s.code, out };
    },
  };
}

/** A data dir and a config serving on 127.0.0.1 at a port of the system's choosing. */
async function withConfig(fn: (config: string, dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-tasks-" });
  try {
    const config = join(dir, "wharf.toml");
    await Deno.writeTextFile(
      config,
      `[server]\nbind_address = "127.0.0.1"\nport = 0\n` +
        `[blob_store.fs]\nroot_dir = ${JSON.stringify(join(dir, "blobs"))}\n` +
        `[metadata_store]\npath = ${JSON.stringify(join(dir, "metadata.kv"))}\n`,
    );
    await fn(config, dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("every deno.json task that starts Wharf has a test here", () => {
  assert.deepEqual(projectTasks().map((t) => t.name).sort(), TESTED);
});

Deno.test({
  ...serverTestOpts,
  name: "deno task start: serves /healthz, its startup line names the sandbox process; stops",
  fn: () =>
    withConfig(async (config) => {
      const t = spawnTask(["start", "-c", config]);
      try {
        const m = await t.until(/wharf listening on (http:\/\/127\.0\.0\.1:\d+) \((.*)\)\n/);
        assert.match(m[2], /\bsandbox process\b/, m[0]);
        const r = await fetch(`${m[1]}/healthz`, { signal: AbortSignal.timeout(20_000) });
        await r.body?.cancel();
        assert.equal(r.status, 200);
      } finally {
        const { code, out } = await t.stop();
        assert.equal(code, 0, out);
        assert.match(out, /^wharf stopped$/m);
      }
    }),
});

Deno.test({
  ...serverTestOpts,
  name: "deno task worker: says which queues it drains; stops",
  fn: () =>
    withConfig(async (config) => {
      const t = spawnTask(["worker", "-c", config]);
      try {
        await t.until(/^wharf worker draining cache \(\d+ at a time\), .*; serving no HTTP/m);
        await t.until(/press Ctrl\+C to stop\n/);
      } finally {
        const { code, out } = await t.stop();
        assert.equal(code, 0, out);
        assert.match(out, /^wharf worker stopped$/m);
      }
    }),
});

Deno.test("deno task scrub: one pass, exit 0, its summary", () =>
  withConfig(async (config) => {
    const o = await task(["scrub", "-c", config]).output();
    const out = dec.decode(o.stdout);
    assert.equal(o.code, 0, out + dec.decode(o.stderr));
    assert.match(out, /^scrub: 0 blob\(s\) reclaimed \(0 bytes\), .* keys\/objects in [\d.]+s/m);
  }));

Deno.test("deno task hash-password: the argon2id hash of the password on standard input", async () => {
  const child = task(["hash-password"], "piped").spawn();
  const w = child.stdin.getWriter();
  await w.write(new TextEncoder().encode("correct horse battery staple\n"));
  await w.close();
  const o = await child.output();
  const out = dec.decode(o.stdout);
  assert.equal(o.code, 0, out + dec.decode(o.stderr));
  const phc = out.trim();
  assert.match(phc, /^\$argon2id\$v=19\$m=\d+,t=\d+,p=\d+\$[A-Za-z0-9+/]+\$[A-Za-z0-9+/]+$/);
  assert.ok(await verify(phc, "correct horse battery staple"), "the hash is of that password");
  assert.ok(!(await verify(phc, "correct horse battery")), "and of no other");
});

Deno.test("deno task wharf --help: lists every command", async () => {
  const src = await Deno.readTextFile(join(ROOT, "commands", "main.ts"));
  const sw = src.slice(src.indexOf("switch (cli.command)"));
  const commands = [...sw.slice(0, sw.indexOf("default:")).matchAll(/case "([a-z-]+)":/g)]
    .map((m) => m[1]);
  assert.ok(commands.includes("serve") && commands.includes("hash-password"), commands.join());
  const o = await task(["wharf", "--help"]).output();
  const out = dec.decode(o.stdout);
  assert.equal(o.code, 0, dec.decode(o.stderr));
  assert.match(out, /^Usage: main\.ts \[COMMAND\] \[OPTIONS\]$/m);
  for (const c of commands) assert.match(out, new RegExp(`^  ${c} +\\S`, "m"), `${c} not listed`);
});

Deno.test({
  ...serverTestOpts,
  name:
    "without run access (every flag of the set but --allow-run) serve refuses: exit 2, one line",
  fn: () =>
    withConfig(async (config, dir) => {
      // The set's grants as flags, run left out: the one spawn of main.ts with flags of its own
      // (tests/launch_test.ts names this file as its exception).
      const set = JSON.parse(await Deno.readTextFile(join(ROOT, "deno.json"))).permissions.wharf;
      const flags = Object.entries(set as Record<string, unknown>)
        .filter(([name, grant]) => name !== "run" && grant === true)
        .map(([name]) => `--allow-${name}`);
      assert.deepEqual(flags.sort(), [
        "--allow-env",
        "--allow-ffi",
        "--allow-net",
        "--allow-read",
        "--allow-sys",
        "--allow-write",
      ]);
      const child = new Deno.Command(Deno.execPath(), {
        args: ["run", ...flags, "main.ts", "serve", "-c", config],
        cwd: ROOT,
        env: { NO_COLOR: "1", RUST_BACKTRACE: "0" },
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
      }).spawn();
      // A server that starts anyway would run until stopped: bound it.
      const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
      const o = await child.output();
      clearTimeout(timer);
      const out = dec.decode(o.stdout);
      const err = dec.decode(o.stderr);
      assert.equal(o.code, 2, out + err);
      assert.doesNotMatch(out, /listening on/);
      const lines = err.trimEnd().split("\n");
      assert.equal(lines.length, 1, err);
      assert.match(lines[0], /^wharf: cannot start: .*sandbox = "process" .*--allow-run/, err);
      // Refused before anything was opened.
      await assert.rejects(Deno.stat(join(dir, "metadata.kv")), Deno.errors.NotFound);
    }),
});
