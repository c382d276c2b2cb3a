// The command line, run as a newcomer runs it: the real main.ts as a process, started as its
// deno.json task starts it (`deno task wharf --help`, `deno task worker`). --help for main.ts and
// every command it dispatches, a one-line error when the port is taken (before anything is
// opened), and a worker that says what it drains and when it stops. Deno's own note that the
// permission set comes from deno.json precedes Wharf's output on stderr; what Wharf prints is
// compared without it.
import assert from "node:assert/strict";
import { join } from "node:path";
import { serverTestOpts } from "../helpers/api.ts";
import { ROOT, wharfCommand, wharfStderr } from "../helpers/launch.ts";

const dec = new TextDecoder();

async function wharf(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const o = await wharfCommand(args, { env: { NO_COLOR: "1" }, stdin: "null" }).output();
  return { code: o.code, stdout: dec.decode(o.stdout), stderr: wharfStderr(dec.decode(o.stderr)) };
}

/** The commands main.ts dispatches: the cases of the command switch (commands/main.ts). */
async function dispatched(): Promise<string[]> {
  const src = await Deno.readTextFile(join(ROOT, "commands", "main.ts"));
  const sw = src.slice(src.indexOf("switch (cli.command)"));
  return [...sw.slice(0, sw.indexOf("default:")).matchAll(/case "([a-z-]+)":/g)].map((m) => m[1]);
}

Deno.test("main.ts --help lists every command it dispatches; each has its own --help", async () => {
  const commands = await dispatched();
  assert.ok(commands.includes("serve") && commands.includes("advisories"), commands.join());
  const top = await wharf(["--help"]);
  assert.equal(top.code, 0, top.stderr);
  assert.match(top.stdout, /^Usage: main\.ts \[COMMAND\] \[OPTIONS\]$/m);
  assert.match(top.stdout, /^ {2}-c, --config FILE/m);
  for (const c of commands) {
    assert.match(top.stdout, new RegExp(`^  ${c} +\\S`, "m"), `${c} is not listed`);
  }
  assert.equal((await wharf(["-h"])).stdout, top.stdout);
  assert.equal((await wharf(["help"])).stdout, top.stdout);
  await Promise.all(commands.map(async (c) => {
    for (const args of [[c, "--help"], ["help", c], [c, "--bogus", "--help"]]) {
      const r = await wharf(args);
      assert.equal(r.code, 0, `${args.join(" ")}: ${r.stderr}`);
      assert.match(
        r.stdout,
        new RegExp(`^Usage: main\\.ts (\\[${c}\\]|${c})`),
        `${args.join(" ")}: ${r.stdout}`,
      );
      assert.equal(r.stderr, "", args.join(" "));
    }
  }));
  const adv = await wharf(["advisories", "--help"]);
  assert.match(adv.stdout, /main\.ts advisories fetch \[--dir D\] \[--ecosystem E\]/);
  assert.match(adv.stdout, /main\.ts advisories status/);

  // Mistakes say where help is, in one line, with a non-zero status.
  const unknown = await wharf(["frobnicate"]);
  assert.equal(unknown.code, 2);
  assert.match(
    unknown.stderr,
    /^wharf: unknown command frobnicate \(commands: .*; main\.ts --help\)\n$/,
  );
  const bad = await wharf(["scrub", "--bogus"]);
  assert.equal(bad.code, 2);
  assert.equal(
    bad.stderr,
    "wharf: unknown argument --bogus (main.ts scrub --help lists the options)\n",
  );
});

function freePortHeld(): Deno.Listener & { addr: Deno.NetAddr } {
  return Deno.listen({ hostname: "127.0.0.1", port: 0 }) as Deno.Listener & {
    addr: Deno.NetAddr;
  };
}

Deno.test({
  ...serverTestOpts,
  name: "a taken port stops serve with one line and status 1, before any store is opened",
  fn: async () => {
    const held = freePortHeld();
    const dir = await Deno.makeTempDir({ prefix: "wharf-cli-port-" });
    try {
      const config = join(dir, "wharf.toml");
      await Deno.writeTextFile(
        config,
        `[server]\nbind_address = "127.0.0.1"\nport = ${held.addr.port}\n` +
          `[blob_store.fs]\nroot_dir = ${JSON.stringify(join(dir, "blobs"))}\n` +
          `[metadata_store]\npath = ${JSON.stringify(join(dir, "m.kv"))}\n`,
      );
      const r = await wharf(["serve", "-c", config]);
      assert.equal(r.code, 1, r.stdout + r.stderr);
      assert.equal(
        r.stderr,
        `wharf: 127.0.0.1:${held.addr.port} is already in use (another Wharf or another service); stop it or set [server] port\n`,
      );
      assert.equal(r.stdout, "");
      await assert.rejects(Deno.stat(join(dir, "m.kv")), Deno.errors.NotFound);
    } finally {
      held.close();
      await Deno.remove(dir, { recursive: true });
    }
  },
});

/** Reads `stream` until `want` appears; returns everything read so far. */
async function readUntil(
  reader: ReadableStreamDefaultReader<Uint8Array>,
  want: RegExp,
  seen = "",
): Promise<string> {
  const deadline = Date.now() + 60_000;
  while (!want.test(seen)) {
    if (Date.now() > deadline) assert.fail(`no ${want} in:\n${seen}`);
    const r = await reader.read();
    if (r.done) assert.fail(`ended without ${want}:\n${seen}`);
    seen += dec.decode(r.value);
  }
  return seen;
}

Deno.test({
  ...serverTestOpts,
  name: "worker says which queues it drains (no web UI), and says when it stops",
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "wharf-cli-worker-" });
    try {
      const config = join(dir, "wharf.toml");
      await Deno.writeTextFile(
        config,
        `[blob_store.fs]\nroot_dir = ${JSON.stringify(join(dir, "blobs"))}\n` +
          `[metadata_store]\npath = ${JSON.stringify(join(dir, "m.kv"))}\n` +
          `[ui]\nenabled = true\n`,
      );
      for (
        const [args, drains] of [
          [
            ["--queue", "scan", "--queue", "index"],
            /draining scan \(1 at a time\), index \(1 at a time\); serving no HTTP/,
          ],
          [
            [],
            /draining cache \(4 at a time\), replication \(2 at a time\), scan \(1 at a time\), index \(1 at a time\), events \(4 at a time\) and the webhook outbox; serving no HTTP/,
          ],
        ] as const
      ) {
        const p = wharfCommand(["worker", ...args, "-c", config], {
          env: { NO_COLOR: "1" },
          stdout: "piped",
          stderr: "piped",
          stdin: "null",
        }).spawn();
        const reader = p.stdout.getReader();
        let out = await readUntil(reader, /press Ctrl\+C to stop\n/);
        assert.match(out, drains);
        assert.doesNotMatch(out, /web UI/);
        p.kill("SIGTERM");
        for (;;) {
          const r = await reader.read();
          if (r.done) break;
          out += dec.decode(r.value);
        }
        const st = await p.status;
        const err = dec.decode(await new Response(p.stderr).arrayBuffer());
        assert.equal(st.code, 0, out + err);
        assert.match(
          out,
          /^wharf worker stopping: finishing running jobs\nwharf worker stopped\n$/m,
        );
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
