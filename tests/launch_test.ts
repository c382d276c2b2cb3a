// Servers under test start as they ship: no source under tests/, bench/, lib/, routes/ or
// commands/ spawns main.ts itself (with flags of its own, such as -A), only tests/helpers/launch.ts
// does, as deno.json's task for the command; and the launcher's argument vector is the task.
// The sources are scanned, not run: a spawn is a `new Deno.Command(…)` (or node:child_process
// call) whose arguments name main.ts, directly, through a variable or function bound to it in
// the same file, or handed to a function of that file that spawns.
import assert from "node:assert/strict";
import { join, relative } from "node:path";
import {
  assertAsTask,
  launchOf,
  projectTasks,
  ROOT,
  taskArgs,
  taskFor,
  taskWords,
  wharfTasks,
} from "./helpers/launch.ts";

const FOLDERS = ["tests", "bench", "lib", "routes", "commands"];

/** The launcher itself: the one file that starts Wharf. */
const LAUNCHER = "tests/helpers/launch.ts";

/**
 * Files that may spawn main.ts with flags of their own, and how many times. Only the test that a
 * server without run access refuses to start: it needs a grant the permission set does not
 * make (every flag of the set but --allow-run), which the launcher refuses by design.
 */
const EXCEPTIONS: Record<string, number> = { "tests/tasks_test.ts": 1 };

// ---------------------------------------------------------------------------------------------
// The scanner

/** Source with comments blanked (newlines kept), and which characters are inside a literal. */
interface Lexed {
  text: string;
  literal: Uint8Array;
}

const WORD = /[\w$]/;
/** After these (or nothing), a `/` starts a regular expression rather than a division. */
const BEFORE_REGEX =
  /^([(,=:[!&|?{};+\-*%<>~^]|return|typeof|case|in|of|void|delete|throw|new|else|yield|await|instanceof)?$/;

function lex(src: string): Lexed {
  const text = src.split("");
  const literal = new Uint8Array(src.length);
  let i = 0;
  let prev = ""; // the last token outside literals: a punctuation character or a word
  let braces = 0;
  const templates: number[] = []; // brace depth at each open `${`
  const blank = (from: number, to: number) => {
    for (let k = from; k < to; k++) if (text[k] !== "\n") text[k] = " ";
  };
  const mark = (from: number, to: number) => literal.fill(1, from, to);
  /** Scans a template's text from `i` (after ` or }) to its end or its next `${`. */
  const templateText = () => {
    const start = i;
    while (i < src.length && src[i] !== "`" && !(src[i] === "$" && src[i + 1] === "{")) {
      i += src[i] === "\\" ? 2 : 1;
    }
    mark(start, i);
    if (src[i] === "`") {
      literal[i++] = 1;
      prev = "a";
    } else if (i < src.length) {
      i += 2;
      templates.push(++braces);
      prev = "{";
    }
  };
  while (i < src.length) {
    const c = src[i];
    if (c === "/" && src[i + 1] === "/") {
      const end = src.indexOf("\n", i);
      blank(i, end < 0 ? src.length : end);
      i = end < 0 ? src.length : end;
    } else if (c === "/" && src[i + 1] === "*") {
      const end = src.indexOf("*/", i + 2);
      blank(i, end < 0 ? src.length : end + 2);
      i = end < 0 ? src.length : end + 2;
    } else if (c === "'" || c === '"') {
      const start = i++;
      while (i < src.length && src[i] !== c && src[i] !== "\n") i += src[i] === "\\" ? 2 : 1;
      mark(start, ++i);
      prev = "a";
    } else if (c === "`") {
      literal[i++] = 1;
      templateText();
    } else if (c === "/" && BEFORE_REGEX.test(prev)) {
      const start = i++;
      let inClass = false;
      while (i < src.length && src[i] !== "\n" && (inClass || src[i] !== "/")) {
        if (src[i] === "[") inClass = true;
        else if (src[i] === "]") inClass = false;
        i += src[i] === "\\" ? 2 : 1;
      }
      i++;
      while (WORD.test(src[i] ?? "")) i++; // flags
      mark(start, i);
      prev = "a";
    } else if (WORD.test(c)) {
      const start = i;
      while (i < src.length && WORD.test(src[i])) i++;
      prev = src.slice(start, i);
    } else {
      if (c === "{") braces++;
      if (c === "}") {
        if (templates.at(-1) === braces) {
          templates.pop();
          braces--;
          i++;
          templateText();
          continue;
        }
        braces--;
      }
      if (!/\s/.test(c)) prev = c;
      i++;
    }
  }
  return { text: text.join(""), literal };
}

const OPEN: Record<string, string> = { "(": ")", "[": "]", "{": "}" };

/** The index just past the bracket closing the one at `open`. */
function closing(lx: Lexed, open: number): number {
  const stack: string[] = [];
  for (let i = open; i < lx.text.length; i++) {
    if (lx.literal[i]) continue;
    const c = lx.text[i];
    if (OPEN[c]) stack.push(OPEN[c]);
    else if (c === ")" || c === "]" || c === "}") {
      stack.pop();
      if (stack.length === 0) return i + 1;
    }
  }
  return lx.text.length;
}

/** The end of the expression starting at `from`: a `;` or `,` at its depth, or its block's end. */
function expressionEnd(lx: Lexed, from: number): number {
  let depth = 0;
  for (let i = from; i < lx.text.length; i++) {
    if (lx.literal[i]) continue;
    const c = lx.text[i];
    if (OPEN[c]) depth++;
    else if (c === ")" || c === "]" || c === "}") {
      if (--depth < 0) return i;
    } else if ((c === ";" || c === ",") && depth === 0) return i;
  }
  return lx.text.length;
}

/** A function declaration's parameters and body: up to the block that is not a return type. */
function functionEnd(lx: Lexed, params: number): number {
  let i = closing(lx, params);
  for (;;) {
    while (i < lx.text.length && (lx.literal[i] || lx.text[i] !== "{")) i++;
    const end = closing(lx, i);
    // `): Promise<{ a: string }> {`: a block followed by more of the type is the type.
    const next = lx.text.slice(end).match(/^\s*(\S)/)?.[1];
    if (next === undefined || !/[>|&[\]{]/.test(next)) return end;
    i = end;
  }
}

const MAIN_NAMED = /(?<![\w-])main\.ts\b/;
const SPAWN =
  /(new\s+Deno\.Command|Deno\.run|(?<![\w$.])(spawn|spawnSync|execFile|execFileSync|execSync|fork)|child_process\.\w+)\s*\(/g;

interface Binding {
  name: string;
  text: string;
}

/** Names a file binds (const/let/var, function declarations) with the text they are bound to. */
function bindings(lx: Lexed): Binding[] {
  const out: Binding[] = [];
  const decl = /\b(?:const|let|var)\s+([A-Za-z_$][\w$]*)\s*(?::[^=;]*)?=(?![=>])/g;
  for (const m of lx.text.matchAll(decl)) {
    if (lx.literal[m.index]) continue;
    const from = m.index + m[0].length;
    out.push({ name: m[1], text: lx.text.slice(from, expressionEnd(lx, from)) });
  }
  const fn = /\bfunction\s*\*?\s*([A-Za-z_$][\w$]*)\s*(?:<[^(]*>)?\s*\(/g;
  for (const m of lx.text.matchAll(fn)) {
    if (lx.literal[m.index]) continue;
    const params = m.index + m[0].length - 1;
    out.push({ name: m[1], text: lx.text.slice(params, functionEnd(lx, params)) });
  }
  return out;
}

/** A name as it is used (not as a property, nor a part of a longer name). */
const use = (name: string, after = "(?![\\w$])", flags = "") =>
  new RegExp(`(?<![\\w$.])${name.replaceAll("$", "\\$")}${after}`, flags);
const called = (name: string, flags = "") => use(name, "\\s*\\(", flags);

/** Whether `text` names main.ts, or a name bound to it. */
const mentions = (text: string, names: Set<string>) =>
  MAIN_NAMED.test(text) || [...names].some((n) => use(n).test(text));

/** Whether `text` spawns, or calls a function that does. */
const hasSpawn = (text: string, spawners: Set<string>) =>
  new RegExp(SPAWN.source).test(text) || [...spawners].some((n) => called(n).test(text));

export interface MainSpawn {
  line: number;
  text: string;
}

/** The places in `src` that spawn main.ts. */
export function mainSpawns(src: string): MainSpawn[] {
  const lx = lex(src);
  const bound = bindings(lx);
  // Functions (and values) that spawn, then names bound to main.ts, each to a fixed point. What
  // a spawn gives back (its process, its output) is not main.ts's name, so it spreads nothing.
  const spawners = new Set<string>();
  const tainted = new Set<string>();
  const grow = (set: Set<string>, test: (b: Binding) => boolean) => {
    for (let changed = true; changed;) {
      changed = false;
      for (const b of bound) {
        if (set.has(b.name) || !test(b)) continue;
        set.add(b.name);
        changed = true;
      }
    }
  };
  grow(spawners, (b) => hasSpawn(b.text, spawners));
  grow(tainted, (b) => !spawners.has(b.name) && mentions(b.text, tainted));
  const calls: { at: number; open: number }[] = [];
  for (const m of lx.text.matchAll(SPAWN)) {
    if (!lx.literal[m.index]) calls.push({ at: m.index, open: m.index + m[0].length - 1 });
  }
  for (const name of spawners) {
    for (const m of lx.text.matchAll(called(name, "g"))) {
      const before = lx.text.slice(0, m.index);
      if (lx.literal[m.index] || /\bfunction\s*\*?\s*$/.test(before)) continue;
      calls.push({ at: m.index, open: m.index + m[0].length - 1 });
    }
  }
  const found: MainSpawn[] = [];
  for (const c of calls) {
    // What is passed: the call's arguments.
    if (!mentions(lx.text.slice(c.open, closing(lx, c.open)), tainted)) continue;
    const text = lx.text.slice(c.at, closing(lx, c.open));
    found.push({ line: src.slice(0, c.at).split("\n").length, text });
  }
  return found.sort((a, b) => a.line - b.line);
}

async function* sources(dir: string): AsyncGenerator<string> {
  for await (const e of Deno.readDir(dir)) {
    const path = join(dir, e.name);
    if (e.isDirectory && e.name !== "node_modules" && e.name !== "out") yield* sources(path);
    else if (e.isFile && e.name.endsWith(".ts")) yield path;
  }
}

// ---------------------------------------------------------------------------------------------
// The scanner on samples

Deno.test("scanner: a spawn of main.ts with -A is caught, in every form it takes here", () => {
  const caught = [
    `await new Deno.Command(Deno.execPath(), { args: ["run", "-A", "main.ts", "serve"] }).output();`,
    `const MAIN = join(ROOT, "main.ts");\n` +
    `const p = new Deno.Command(Deno.execPath(), {\n  args: ["run", "-A", MAIN, "worker"],\n}).spawn();`,
    `const main = new URL("../../main.ts", import.meta.url).pathname;\n` +
    `const args = ["run", "--unstable-kv", "-A", main];\n` +
    `new Deno.Command(Deno.execPath(), { args, cwd: ROOT });`,
    `async function run(cmd: string, args: string[]): Promise<{ code: number }> {\n` +
    `  return await new Deno.Command(cmd, { args }).output();\n}\n` +
    `await run(Deno.execPath(), ["run", "-A", join(ROOT, "main.ts"), "prune"]);`,
    `import { spawn } from "node:child_process";\nspawn("deno", ["run", "-A", "./main.ts"]);`,
  ];
  for (const src of caught) assert.equal(mainSpawns(src).length, 1, src);
  assert.equal(mainSpawns(caught[3])[0].line, 4);
});

Deno.test("scanner: spawns of other programs, and main.ts named outside a spawn, pass", () => {
  const passed = [
    `new Deno.Command(Deno.execPath(), { args: ["run", "-A", "tests/helpers/s3rver_main.ts"] });`,
    `const MAIN = fileURLToPath(new URL("./s3rver_main.ts", import.meta.url));\n` +
    `new Deno.Command(Deno.execPath(), { args: ["run", "-A", MAIN, dir] }).spawn();`,
    `// starts main.ts serve\nnew Deno.Command("openssl", { args: ["version"] });`,
    `const src = await Deno.readTextFile(join(ROOT, "main.ts"));\n` +
    `new Deno.Command("git", { args: ["ls-files", "dist"] });`,
    // a regular expression with a quote, and a template literal, do not derail the scan
    `const q = /"/;\nconst t = \`\${q} \${"main.ts"}\`;\n` +
    `new Deno.Command("tar", { args: ["-tf", \`\${dir}/x.tar\`] }).output();`,
    `wharfCommand(["serve", "-c", config], { stdout: "piped" }).spawn();`,
  ];
  for (const src of passed) assert.deepEqual(mainSpawns(src), [], src);
});

// ---------------------------------------------------------------------------------------------
// The sources

Deno.test("no source spawns main.ts but the launcher (and the one named exception)", async () => {
  const seen = new Map<string, MainSpawn[]>();
  let files = 0;
  for (const folder of FOLDERS) {
    for await (const path of sources(join(ROOT, folder))) {
      const rel = relative(ROOT, path).replaceAll("\\", "/");
      if (rel === LAUNCHER) continue;
      files++;
      const found = mainSpawns(await Deno.readTextFile(path));
      if (found.length > 0) seen.set(rel, found);
    }
  }
  assert.ok(files > 200, `only ${files} sources scanned`);
  const wrong: string[] = [];
  for (const [rel, found] of seen) {
    if (found.length === EXCEPTIONS[rel]) {
      // The exception's spawn still may not grant everything, nor run access.
      for (const f of found) {
        assert.doesNotMatch(f.text, /"-A"|--allow-all|--allow-run/, `${rel}:${f.line}`);
      }
      continue;
    }
    for (const f of found) wrong.push(`${rel}:${f.line}: ${f.text.split("\n")[0]}`);
  }
  assert.deepEqual(
    wrong,
    [],
    `these spawn main.ts themselves; start Wharf through tests/helpers/launch.ts ` +
      `(startServer, runCli or wharfCommand) instead:\n${wrong.join("\n")}`,
  );
  for (const [rel, n] of Object.entries(EXCEPTIONS)) {
    assert.equal(seen.get(rel)?.length ?? 0, n, `${rel} is an exception for ${n} spawn(s)`);
  }
});

// ---------------------------------------------------------------------------------------------
// The launcher

Deno.test("launcher: each task's argument vector is deno.json's task, with no -A", async () => {
  const json = JSON.parse(await Deno.readTextFile(join(ROOT, "deno.json")));
  const tasks = projectTasks();
  assert.deepEqual(
    tasks.map((t) => t.name).sort(),
    ["hash-password", "scrub", "start", "wharf", "worker"],
  );
  for (const t of tasks) {
    const written = (json.tasks[t.name] as string).trim().split(/\s+/);
    assert.equal(written[0], "deno");
    assert.deepEqual(taskArgs(t), written.slice(1), t.name);
    assert.ok(!taskArgs(t).some((a) => a === "-A" || a === "--allow-all"), t.name);
    assert.ok(taskArgs(t).includes("-P=wharf"), `${t.name} runs with the permission set`);
  }
  // A command finds its task: serve is `start`; one without a task of its own goes to `wharf`.
  assert.equal(taskFor(["serve", "-c", "x.toml"]).task.name, "start");
  assert.deepEqual(taskFor(["serve", "-c", "x.toml"]).extra, ["-c", "x.toml"]);
  assert.equal(taskFor(["worker"]).task.name, "worker");
  assert.equal(taskFor(["scrub", "--dry-run"]).task.name, "scrub");
  assert.equal(taskFor(["hash-password"]).task.name, "hash-password");
  assert.deepEqual(taskFor(["reindex", "-c", "x.toml"]).task.name, "wharf");
  assert.deepEqual(taskFor(["reindex", "-c", "x.toml"]).extra, ["reindex", "-c", "x.toml"]);
  assert.deepEqual(taskFor(["--help"]).extra, ["--help"]);

  if (!Deno.env.get("WHARF_SERVER_INSPECT") && !Deno.env.get("WHARF_SERVER_CPU_PROF")) {
    const start = tasks.find((t) => t.name === "start")!;
    assert.deepEqual(launchOf(["serve", "-c", "/x.toml"]), {
      command: Deno.execPath(),
      args: [...json.tasks.start.split(/\s+/).slice(1), "-c", "/x.toml"],
      cwd: ROOT,
    });
    assert.deepEqual(launchOf(["serve", "-c", "/x.toml"]).args, taskArgs(start, ["-c", "/x.toml"]));
    // Elsewhere than the root, only the script's name differs: its absolute path.
    const away = launchOf(["serve"], "/tmp");
    assert.equal(away.cwd, "/tmp");
    assert.deepEqual(away.args, taskWords(start).map((w) => w === "main.ts" ? join(ROOT, w) : w));
  }
});

Deno.test("launcher: refuses -A, a caller's permission flags, and anything but the task", () => {
  const start = projectTasks().find((t) => t.name === "start")!;
  const own = taskWords(start);
  for (const flag of ["-A", "--allow-all", "--allow-run", "--allow-run=curl", "--deny-net", "-R"]) {
    assert.throws(() => taskArgs(start, ["-c", "x.toml", flag]), /launch: refused/, flag);
  }
  assert.throws(() => assertAsTask(start, ["run", "-A", ...own.slice(1)]), /grants every/);
  assert.throws(
    () => assertAsTask(start, [own[0], "--allow-run", ...own.slice(1)]),
    /not the task/,
  );
  assert.throws(
    () => assertAsTask(start, own.filter((w) => !w.startsWith("--v8"))),
    /not the task/,
  );
  assert.throws(
    () => assertAsTask(start, ["run", "-P=wharf", "other.ts", "serve"]),
    /not the task/,
  );
  assert.doesNotThrow(() => assertAsTask(start, [...own, "-c", "x.toml", "--dry-run"]));

  // A deno.json whose task grants everything, or is more than one plain command, is refused.
  const withA = JSON.stringify({ tasks: { start: "deno run -A main.ts serve" } });
  const [a] = wharfTasks(withA);
  assert.throws(() => taskArgs(a), /-A grants every permission/);
  for (
    const line of [
      "FOO=1 deno run -P=wharf main.ts serve",
      "deno run -P=wharf main.ts serve && echo done",
      "deno run -P=wharf main.ts serve '-c' x",
    ]
  ) {
    assert.throws(() => wharfTasks(JSON.stringify({ tasks: { t: line } })), /not a plain/, line);
  }
  // Tasks that do not run main.ts are none of the launcher's business.
  assert.deepEqual(
    wharfTasks(JSON.stringify({ tasks: { check: "deno check main.ts lib/ && cd ui" } })),
    [],
  );
});
