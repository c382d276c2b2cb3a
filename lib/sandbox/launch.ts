// How a sandbox child process is started, in each shipped form (docs/design.md, "As shipped"):
//
// - from source (`deno task start`, the container image): the Deno runtime on the child's entry
//   module, with a grant of its own (read its inputs, write its scratch folder, FFI) and a V8
//   heap cap: `deno run --allow-read=… <module> <args>`.
// - a `deno compile` binary: there is no runtime to hand a module to (`Deno.execPath()` is Wharf
//   itself), so the child is this same executable started on its internal entry point,
//   `wharf __sandbox-child <module> <args>` (main.ts). Its permissions are the binary's, baked in
//   at compile time; the entry point revokes what Deno lets a running process give up (net, run,
//   env, sys, and write and FFI where the parse needs neither) before it loads the parse
//   (lib/sandbox/entry.ts). Read access, and write access where the parse writes its scratch
//   folder, cannot be narrowed to paths there. Its heap cap comes through DENO_V8_FLAGS.
//
// Which executable may be started is checked once, against this process's permissions: the
// permission set (deno.json's "wharf") grants run access to `deno` as found on PATH, which is
// this runtime when PATH's `deno` is the same file as `Deno.execPath()`.
import { delimiter, join } from "node:path";

/** The internal subcommand a self-started child runs (main.ts dispatches it first). */
export const SANDBOX_ENTRY = "__sandbox-child";

/** The project root, which the child's module names are relative to. */
const ROOT = new URL("../../", import.meta.url);
/** The deno.json whose import map, lock file and permission set a child loads with. */
export const CONFIG = new URL("deno.json", ROOT);
const MAIN = new URL("main.ts", ROOT);
/** deno.json's permission set for every Wharf process. */
export const PERMISSION_SET = "wharf";

export type LaunchStyle = "module" | "self";

/** What to run for one child: the executable, its arguments and its environment. */
export interface ChildCommand {
  command: string;
  args: string[];
  env: Record<string, string>;
}

export interface ChildLaunchSpec {
  module: URL;
  args: unknown;
  readPaths?: string[];
  writePaths?: string[];
  ffi?: boolean;
  /** the V8 flags of the child (its heap cap) */
  v8Flags: string[];
}

/**
 * "self" in a compiled binary; "module" from source, unless WHARF_SANDBOX_LAUNCH=self asks for
 * the binary's way from source too (the tests run the compiled path's entry point and arguments
 * that way: `deno compile` needs a runtime download these machines cannot make).
 */
export function launchStyle(): LaunchStyle {
  if (Deno.build.standalone) return "self";
  try {
    return Deno.env.get("WHARF_SANDBOX_LAUNCH") === "self" ? "self" : "module";
  } catch {
    return "module";
  }
}

/** The child's module as the entry point names it: its path under the project root. */
export function entryName(module: URL): string {
  if (!module.href.startsWith(ROOT.href)) {
    throw new Error(`sandbox child ${module.href} is not under ${ROOT.href}`);
  }
  return module.href.slice(ROOT.href.length);
}

function granted(command: string): boolean {
  try {
    return Deno.permissions.querySync({ name: "run", command }).state === "granted";
  } catch {
    return false;
  }
}

function realpath(path: string): string | null {
  try {
    return Deno.realPathSync(path);
  } catch {
    return null;
  }
}

/** The first `deno` on PATH, and whether it is this very runtime. */
function denoOnPath(self: string): { path: string; same: boolean } | null {
  let path: string | undefined;
  try {
    path = Deno.env.get("PATH");
  } catch {
    return null;
  }
  const name = Deno.build.os === "windows" ? "deno.exe" : "deno";
  for (const dir of (path ?? "").split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    const real = realpath(candidate);
    if (real === null) continue;
    // The first `deno` on PATH is the one a grant of `--allow-run=deno` names.
    return { path: candidate, same: real === self };
  }
  return null;
}

let resolved: { executable: string | null } | null = null;

/**
 * The executable a child is started with, if this process may start it: this runtime (or, in a
 * compiled binary, this binary) by its own path or as PATH's `deno`. Null when neither is
 * granted. Read once: permissions and PATH do not change while Wharf runs.
 */
export function childExecutable(): string | null {
  if (resolved) return resolved.executable;
  const self = Deno.execPath();
  const real = realpath(self) ?? self;
  let executable: string | null = null;
  if (granted(self)) executable = self;
  else if (!Deno.build.standalone) {
    const onPath = denoOnPath(real);
    if (onPath?.same && granted(onPath.path)) executable = onPath.path;
  }
  resolved = { executable };
  return executable;
}

/**
 * Why no sandbox process can be started here, as the end of a sentence naming the flag, or null
 * when one can. Startup refuses to serve with this (a server that runs degraded in silence would
 * list no layer and scan no image).
 */
export function processSandboxProblem(): string | null {
  if (childExecutable() !== null) return null;
  const self = Deno.execPath();
  if (Deno.build.standalone) {
    return `needs run access to this binary (${self}) to start its sandbox: compile it with ` +
      `--allow-run (deploy.sh binary does), or set sandbox = "worker"`;
  }
  const onPath = denoOnPath(realpath(self) ?? self);
  const which = onPath === null
    ? ` (PATH has no deno)`
    : onPath.same
    ? ""
    : ` (PATH's deno is ${onPath.path}, another runtime than this one)`;
  return `needs run access to the Deno runtime (${self}) to start its sandbox: start Wharf ` +
    `with its permission set (deno task start, or deno run -P=${PERMISSION_SET} main.ts), ` +
    `which grants --allow-run=deno${which}, or grant --allow-run=${self}, or set ` +
    `sandbox = "worker"`;
}

const flag = (name: string, paths: string[] | undefined) =>
  paths && paths.length > 0 ? [`--allow-${name}=${paths.join(",")}`] : [];

/** The command that starts `spec`'s child, in this process's launch style. */
export function childCommand(spec: ChildLaunchSpec, style = launchStyle()): ChildCommand {
  const executable = childExecutable();
  if (executable === null) throw new Error(processSandboxProblem()!);
  const base = { NO_COLOR: "1", RUST_BACKTRACE: "0" };
  const json = JSON.stringify(spec.args);
  if (style === "self") {
    // As a compiled binary runs it: the entry point, its module and argument; the heap cap by
    // environment (a binary's own V8 flags are fixed at compile time); what the entry point may
    // keep named in its arguments (`--keep-write`), since it holds the whole grant.
    const prefix = Deno.build.standalone ? [] : [
      "run",
      "--quiet",
      "--no-prompt",
      "--cached-only",
      `--config=${CONFIG.pathname}`,
      `--permission-set=${PERMISSION_SET}`,
      MAIN.pathname,
    ];
    const keep = [
      ...(spec.writePaths && spec.writePaths.length > 0 ? ["--keep-write"] : []),
      ...(spec.ffi ? ["--keep-ffi"] : []),
    ];
    return {
      command: executable,
      args: [...prefix, SANDBOX_ENTRY, ...keep, entryName(spec.module), json],
      env: { ...base, DENO_V8_FLAGS: spec.v8Flags.join(","), ...denoDirEnv() },
    };
  }
  return {
    command: executable,
    args: [
      "run",
      "--quiet",
      "--no-prompt",
      "--cached-only",
      // The child opens no KV (it may not read the file), but shared modules it loads may
      // build KV values at the top level (Deno.KvU64), which only exists with the flag.
      "--unstable-kv",
      `--config=${CONFIG.pathname}`,
      `--v8-flags=${spec.v8Flags.join(",")}`,
      ...flag("read", spec.readPaths),
      ...flag("write", spec.writePaths),
      ...(spec.ffi ? ["--allow-ffi"] : []),
      spec.module.href,
      json,
    ],
    env: { ...base, ...denoDirEnv() },
  };
}

/** The module cache a child started from source loads its npm packages from (--cached-only). */
function denoDirEnv(): Record<string, string> {
  if (Deno.build.standalone) return {};
  try {
    const explicit = Deno.env.get("DENO_DIR");
    if (explicit) return { DENO_DIR: explicit };
    const home = Deno.env.get("HOME");
    const cache = Deno.env.get("XDG_CACHE_HOME") ?? (home ? `${home}/.cache` : undefined);
    return cache ? { DENO_DIR: `${cache}/deno` } : {};
  } catch {
    return {};
  }
}
