// The two ways a sandbox child is started (launch.ts): the runtime on the module (from source),
// and this program on main.ts's entry point as a compiled binary runs it — here from source, with
// the same entry point and arguments, since `deno compile` cannot run on these machines.
import assert from "node:assert/strict";
import { childCommand, type ChildLaunchSpec, entryName, SANDBOX_ENTRY } from "./launch.ts";

const PROBE = new URL("./probe_child.ts", import.meta.url);
const ROOT = new URL("../../", import.meta.url);

async function run(
  spec: ChildLaunchSpec,
  style: "module" | "self",
  stdin?: Uint8Array,
): Promise<{ code: number; out: string; err: string }> {
  const c = childCommand(spec, style);
  const child = new Deno.Command(c.command, {
    args: c.args,
    clearEnv: true,
    env: c.env,
    stdin: stdin ? "piped" : "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin) {
    const w = child.stdin.getWriter();
    await w.write(stdin);
    await w.close();
  }
  const o = await child.output();
  const dec = new TextDecoder();
  return { code: o.code, out: dec.decode(o.stdout), err: dec.decode(o.stderr) };
}

const line = (out: string) => JSON.parse(out.trim().split("\n").pop()!);
const probe = (extra: Partial<ChildLaunchSpec> = {}): ChildLaunchSpec => ({
  module: PROBE,
  args: { hello: 1 },
  v8Flags: ["--max-old-space-size=64"],
  ...extra,
});

Deno.test("launch: a child module is named by its path under the project root", () => {
  assert.equal(entryName(PROBE), "lib/sandbox/probe_child.ts");
  assert.throws(() => entryName(new URL("file:///elsewhere/x_child.ts")), /not under/);
});

Deno.test("launch self: the binary's entry point and arguments, heap cap by environment", () => {
  const c = childCommand(probe({ writePaths: ["/tmp/x"], ffi: true }), "self");
  const i = c.args.indexOf(SANDBOX_ENTRY);
  assert.ok(i > 0, c.args.join(" "));
  // From source the prefix re-runs main.ts with the permission set every task uses.
  assert.deepEqual(c.args.slice(i - 2, i), ["--permission-set=wharf", `${ROOT.pathname}main.ts`]);
  assert.deepEqual(c.args.slice(i + 1), [
    "--keep-write",
    "--keep-ffi",
    "lib/sandbox/probe_child.ts",
    '{"hello":1}',
  ]);
  assert.equal(c.env.DENO_V8_FLAGS, "--max-old-space-size=64");
  assert.ok(!c.args.some((a) => a === "-A" || a.startsWith("--allow-")), c.args.join(" "));
});

Deno.test("launch self: the entry point gives up what the parse does not need", async () => {
  const bare = await run(probe(), "self");
  assert.equal(bare.code, 0, bare.err);
  const g = line(bare.out).ok.grant;
  // Read cannot be narrowed to paths in a running process; everything else is given up.
  assert.equal(g.read, "granted");
  for (const name of ["write", "net", "env", "run", "sys", "ffi"]) {
    assert.notEqual(g[name], "granted", `${name}: ${g[name]}`);
  }
  const keeping = await run(probe({ writePaths: ["/tmp"], ffi: true }), "self");
  const k = line(keeping.out).ok.grant;
  assert.equal(k.write, "granted");
  assert.equal(k.ffi, "granted");
  assert.notEqual(k.net, "granted");
});

Deno.test("launch module: the child holds only its own narrow grant", async () => {
  const r = await run(probe({ readPaths: ["/tmp"] }), "module");
  assert.equal(r.code, 0, r.err);
  const g = line(r.out).ok.grant;
  for (const name of ["write", "net", "env", "run", "sys", "ffi"]) {
    assert.notEqual(g[name], "granted", `${name}: ${g[name]}`);
  }
});

Deno.test("launch self: a real parse (PEM details) runs through the entry point", async () => {
  const cert = new TextEncoder().encode(
    "-----BEGIN CERTIFICATE-----\nMIIBAA==\n-----END CERTIFICATE-----\n-----BEGIN X-----\nAA==\n-----END X-----\n",
  );
  const spec: ChildLaunchSpec = {
    module: new URL("../index/details_child.ts", import.meta.url),
    args: null,
    v8Flags: ["--max-old-space-size=128"],
  };
  for (const style of ["self", "module"] as const) {
    const r = await run(spec, style, cert);
    assert.equal(r.code, 0, `${style}: ${r.err}`);
    const blocks = line(r.out).ok as { label: string }[];
    assert.deepEqual(blocks.map((b) => b.label), ["CERTIFICATE", "X"], style);
  }
});

Deno.test("launch self: the entry point refuses anything but a child module", async () => {
  const c = childCommand(probe(), "self");
  const prefix = c.args.slice(0, c.args.indexOf(SANDBOX_ENTRY) + 1);
  for (const bad of [["lib/../x_child.ts", "null"], ["main.ts", "null"], ["lib/x/y_child.ts"]]) {
    const o = await new Deno.Command(c.command, {
      args: [...prefix, ...bad],
      env: c.env,
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(o.code, 2, bad.join(" "));
    assert.match(new TextDecoder().decode(o.stderr), /sandbox entry point, not a command/);
  }
});

/** Whether process `pid` has a handler for SIGINT (bit 2 of /proc's SigCgt mask). */
function handlesSigint(pid: number): boolean {
  try {
    const m = /SigCgt:\s*([0-9a-f]+)/.exec(Deno.readTextFileSync(`/proc/${pid}/status`));
    return !!m && (BigInt(`0x${m[1]}`) & 2n) !== 0n;
  } catch {
    return false;
  }
}

Deno.test("launch: a child outlives the SIGINT of a terminal's Ctrl+C", async () => {
  const spec: ChildLaunchSpec = {
    module: new URL("../index/details_child.ts", import.meta.url),
    args: null,
    v8Flags: ["--max-old-space-size=128"],
  };
  for (const style of ["module", "self"] as const) {
    const c = childCommand(spec, style);
    const child = new Deno.Command(c.command, {
      args: c.args,
      clearEnv: true,
      env: c.env,
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const w = child.stdin.getWriter();
    // The child waits for its input's end; the signal comes while it does.
    await w.write(new TextEncoder().encode("-----BEGIN CERTIFICATE-----\nMIIBAA==\n"));
    // Signalled once it handles SIGINT (its SigCgt mask says so): a fixed wait raced a slow
    // start on a busy machine, where the signal came before the listener.
    const end = Date.now() + 30_000;
    while (!handlesSigint(child.pid) && Date.now() < end) {
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(handlesSigint(child.pid), `${style}: the child never listened for SIGINT`);
    child.kill("SIGINT");
    await new Promise((r) => setTimeout(r, 200));
    await w.write(new TextEncoder().encode("-----END CERTIFICATE-----\n"));
    await w.close();
    const o = await child.output();
    assert.equal(o.code, 0, `${style}: ${new TextDecoder().decode(o.stderr)}`);
    const blocks = line(new TextDecoder().decode(o.stdout)).ok as { label: string }[];
    assert.deepEqual(blocks.map((b) => b.label), ["CERTIFICATE"], style);
  }
});
