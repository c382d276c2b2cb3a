// The one way a test or bench starts a Wharf process: as deno.json's task for its command starts
// it (`deno task start` for serve, `deno task wharf <command>` for a command without a task of its
// own), with the permission set every user's process gets. deno.json is read when a process is
// launched, not restated here, so a task that changes is what the tests run; a launch that would
// grant more than the task (-A, a caller's --allow-*) or run anything else than it is refused.
// tests/launch_test.ts keeps every other file from spawning main.ts itself.
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The project root: where deno.json is and where a task runs. */
export const ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** The entry point every Wharf task runs, as the tasks name it. */
const SCRIPT = "main.ts";

/** A task that starts Wharf: its arguments after `deno`, split at the script. */
export interface WharfTask {
  name: string;
  /** `deno` and its flags up to the script: ["run", "-P=wharf", …] */
  runtime: string[];
  /** what the task passes to main.ts: ["serve"], or [] for the general `wharf` task */
  command: string[];
}

/** What starts one process: the executable, its arguments, its working directory. */
export interface Launch {
  command: string;
  args: string[];
  cwd: string;
}

/** Flags that grant permissions: a launch may carry only those of its task. */
const GRANTS =
  /^(-A|--allow-all|--allow-[\w-]+(=.*)?|--deny-[\w-]+(=.*)?|-[RWNESI](=.*)?|-P(=.*)?|--permission-set(=.*)?)$/;

/**
 * The tasks of a deno.json's text that run main.ts. A task is run word by word as written (a
 * shell construct, quoting or an environment assignment would be what deno task runs but not
 * what a spawn runs), so one that is not plain `deno run … main.ts …` is refused.
 */
export function wharfTasks(denoJson: string): WharfTask[] {
  let tasks: Record<string, string>;
  try {
    tasks = JSON.parse(denoJson).tasks ?? {};
  } catch (e) {
    throw new Error(`launch: deno.json is not JSON (${(e as Error).message})`);
  }
  const out: WharfTask[] = [];
  for (const [name, line] of Object.entries(tasks)) {
    // One that runs main.ts, whatever else it does (`deno check main.ts …` runs nothing).
    if (!/\bdeno\s+run\s[^&|;]*?(^|\s)main\.ts(\s|$)/.test(line)) continue;
    const words = line.trim().split(/\s+/);
    const at = words.indexOf(SCRIPT);
    if (words[0] !== "deno" || words[1] !== "run" || /['"`$;&|<>()\\]/.test(line)) {
      throw new Error(`launch: task ${name} is not a plain \`deno run … ${SCRIPT}\`: ${line}`);
    }
    out.push({ name, runtime: words.slice(1, at), command: words.slice(at + 1) });
  }
  return out;
}

let cached: WharfTask[] | null = null;

/** deno.json's Wharf tasks, read from the file once per process. */
export function projectTasks(): WharfTask[] {
  cached ??= wharfTasks(Deno.readTextFileSync(join(ROOT, "deno.json")));
  return cached;
}

/** The task's own argument vector after `deno`, as deno.json writes it. */
export function taskWords(task: WharfTask): string[] {
  return [...task.runtime, SCRIPT, ...task.command];
}

/**
 * Throws unless `args` (after the executable) is `task` as written plus arguments to Wharf that
 * grant nothing: no -A or --allow-all anywhere (not even in the task), and no permission flag
 * beyond the task's own.
 */
export function assertAsTask(task: WharfTask, args: string[]): void {
  const own = taskWords(task);
  const refuse = (why: string) => {
    throw new Error(`launch: refused ${JSON.stringify(args)} for task ${task.name}: ${why}`);
  };
  const all = args.find((a) => a === "-A" || a === "--allow-all");
  if (all) refuse(`${all} grants every permission; Wharf runs with its permission set`);
  if (own.some((w, i) => args[i] !== w)) refuse(`it is not the task (${own.join(" ")})`);
  const extra = args.slice(own.length).find((a) => GRANTS.test(a));
  if (extra) refuse(`${extra} is a permission of the caller's own, not the task's`);
}

/**
 * The task that runs `main.ts <mainArgs…>`: the one named after its command (`start` is
 * `main.ts serve`), else the general one (no command of its own), which gets the command too.
 */
export function taskFor(mainArgs: string[]): { task: WharfTask; extra: string[] } {
  const tasks = projectTasks();
  const own = tasks.find((t) => t.command.length === 1 && t.command[0] === mainArgs[0]);
  if (own) return { task: own, extra: mainArgs.slice(1) };
  const general = tasks.find((t) => t.command.length === 0);
  if (!general) throw new Error(`launch: deno.json has no task for \`${SCRIPT} ${mainArgs[0]}\``);
  return { task: general, extra: mainArgs };
}

/** `task`'s argument vector plus the caller's arguments to Wharf, checked. */
export function taskArgs(task: WharfTask, extra: string[] = []): string[] {
  const args = [...taskWords(task), ...extra];
  assertAsTask(task, args);
  return args;
}

/**
 * Diagnostics a developer may ask of the process by environment, placed before the script
 * (bench/README.md): the V8 inspector (WHARF_SERVER_INSPECT=host:port) or a CPU profile per
 * process (WHARF_SERVER_CPU_PROF=dir). Neither grants anything.
 */
function diagnostics(): string[] {
  const inspect = Deno.env.get("WHARF_SERVER_INSPECT");
  const prof = Deno.env.get("WHARF_SERVER_CPU_PROF");
  return [
    ...(inspect ? [`--inspect=${inspect}`] : []),
    ...(prof ? ["--cpu-prof", `--cpu-prof-dir=${prof}`] : []),
  ];
}

/**
 * How `main.ts <mainArgs…>` is started: this Deno runtime on its task's arguments, in the project
 * root as `deno task` runs it. With `cwd` elsewhere (a process that keeps ./data there), the
 * script is named by its absolute path, the one word that then differs; Deno finds deno.json
 * (the permission set) beside it.
 */
export function launchOf(mainArgs: string[], cwd = ROOT): Launch {
  const { task, extra } = taskFor(mainArgs);
  const args = taskArgs(task, extra);
  const [run, ...rest] = args;
  if (resolve(cwd) !== resolve(ROOT)) rest[task.runtime.length - 1] = join(ROOT, SCRIPT);
  return { command: Deno.execPath(), args: [run, ...diagnostics(), ...rest], cwd };
}

export type WharfCommandOptions = Omit<Deno.CommandOptions, "args">;

/** A Deno.Command running `main.ts <mainArgs…>` as its deno.json task does (see launchOf). */
export function wharfCommand(mainArgs: string[], options: WharfCommandOptions = {}): Deno.Command {
  const cwd = options.cwd instanceof URL ? fileURLToPath(options.cwd) : options.cwd ?? ROOT;
  const l = launchOf(mainArgs, cwd);
  return new Deno.Command(l.command, { ...options, args: l.args, cwd: l.cwd });
}

/** a terminal colour code (when NO_COLOR is not set) */
const COLOR = `(${String.fromCharCode(27)}\\[[\\d;]*m)*`;
/**
 * Deno's note, on standard error, that a process runs with a permission set from deno.json
 * (every Wharf process prints it once at start, as a user's does).
 */
export const PERMISSION_SET_NOTE = new RegExp(
  `^${COLOR}Warning${COLOR} Permissions in the config file is an experimental feature and may ` +
    `change in the future\\.\\n`,
  "m",
);

/** `stderr` without Deno's permission set note, for tests that compare Wharf's own output. */
export function wharfStderr(stderr: string): string {
  return stderr.replace(PERMISSION_SET_NOTE, "");
}
