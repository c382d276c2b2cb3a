// serve's address without a config file (issue 37 item 1): `serve --port N --bind ADDR` and
// WHARF_PORT / WHARF_BIND, in the precedence flag > environment > config file > default; a
// reload keeps them (it does not report [server] as changed); a malformed value stops the start
// naming its flag or variable.
import assert from "node:assert/strict";
import { serverTestOpts } from "../helpers/api.ts";
import { type TestServer, withServer } from "../helpers/server.ts";
import { wharfCommand, wharfStderr } from "../helpers/launch.ts";

/** A port nothing listens on right now. */
function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

/** The address of the server's startup line. */
function listening(s: TestServer): string {
  const m = /wharf listening on http:\/\/(\S+?):(\d+) /.exec(s.output());
  assert.ok(m, s.output());
  return `${m[1]}:${m[2]}`;
}

async function answers(hostPort: string): Promise<boolean> {
  try {
    const r = await fetch(`http://${hostPort}/v2/`, { signal: AbortSignal.timeout(5000) });
    await r.body?.cancel();
    return r.status === 200;
  } catch {
    return false;
  }
}

Deno.test({
  ...serverTestOpts,
  name: "listen: WHARF_PORT and WHARF_BIND over the config file",
  fn: async () => {
    const [inFile, inEnv] = [freePort(), freePort()];
    await withServer({
      port: inFile,
      env: { WHARF_PORT: String(inEnv), WHARF_BIND: "127.0.0.2" },
    }, async (s) => {
      assert.equal(listening(s), `127.0.0.2:${inEnv}`);
      assert.equal(await answers(`127.0.0.2:${inEnv}`), true);
      assert.equal(await answers(`127.0.0.1:${inFile}`), false, "the file's port is not used");
    });
    // An empty variable is unset, as a shell's `WHARF_PORT=` reads: the file's port holds.
    const again = freePort();
    await withServer({ port: again, env: { WHARF_PORT: "", WHARF_BIND: "" } }, async (s) => {
      assert.equal(listening(s), `127.0.0.1:${again}`);
      assert.equal(await answers(`127.0.0.1:${again}`), true);
    });
  },
});

Deno.test({
  ...serverTestOpts,
  name: "listen: --port and --bind over WHARF_PORT/WHARF_BIND and the file; a reload keeps them",
  fn: async () => {
    const [inFile, inEnv, inFlag] = [freePort(), freePort(), freePort()];
    await withServer({
      port: inFile,
      env: { WHARF_PORT: String(inEnv), WHARF_BIND: "127.0.0.2" },
      args: ["--port", String(inFlag), "--bind=127.0.0.3"],
    }, async (s) => {
      assert.equal(listening(s), `127.0.0.3:${inFlag}`);
      assert.equal(await answers(`127.0.0.3:${inFlag}`), true);
      assert.equal(await answers(`127.0.0.2:${inEnv}`), false);
      // A reload reads the same address: [server] is not a key that changed.
      Deno.kill(s.pid, "SIGHUP");
      const deadline = Date.now() + 20_000;
      while (!/"msg":"config reloaded"/.test(s.output())) {
        assert.ok(Date.now() < deadline, `no reload:\n${s.output().slice(-2000)}`);
        await new Promise((res) => setTimeout(res, 100));
      }
      const line = s.output().split("\n").find((l) => l.includes('"msg":"config reloaded"'))!;
      assert.deepEqual(JSON.parse(line).restart, [], line);
      assert.doesNotMatch(s.output(), /needs a restart/);
    });
  },
});

/** `main.ts <args>` in an empty directory (no config file: the newcomer's defaults). */
function inEmptyDir(dir: string, args: string[], env: Record<string, string> = {}) {
  return wharfCommand(args, {
    cwd: dir,
    env: { RUST_BACKTRACE: "0", NO_COLOR: "1", ...env },
    stdout: "piped",
    stderr: "piped",
  });
}

Deno.test({
  ...serverTestOpts,
  name: "listen: without a config file, --port and WHARF_BIND over the defaults",
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "wharf-listen-" });
    const port = freePort();
    const child = inEmptyDir(dir, ["serve", "--port", String(port)], {
      WHARF_BIND: "127.0.0.1",
    }).spawn();
    let out = "";
    const pump = (async () => {
      const dec = new TextDecoder();
      for await (const c of child.stdout) out += dec.decode(c, { stream: true });
    })();
    const err = new Response(child.stderr).text();
    try {
      const deadline = Date.now() + 30_000;
      while (!out.includes("wharf listening on")) {
        assert.ok(Date.now() < deadline, `not listening: ${out}`);
        await new Promise((res) => setTimeout(res, 100));
      }
      assert.match(out, new RegExp(`wharf listening on http://127\\.0\\.0\\.1:${port} `));
      // the rest of the newcomer's defaults hold: the web UI is on
      const r = await fetch(`http://127.0.0.1:${port}/`, { headers: { accept: "text/html" } });
      assert.equal(r.status, 200);
      assert.match(await r.text(), /<div id="app">/);
    } finally {
      child.kill("SIGTERM");
      await child.status;
      await pump;
      await err;
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  ...serverTestOpts,
  name: "listen: a malformed port or address stops the start naming its flag or variable",
  fn: async () => {
    const dir = await Deno.makeTempDir({ prefix: "wharf-listen-" });
    try {
      const cases: [string[], Record<string, string>, string][] = [
        [
          ["serve"],
          { WHARF_PORT: "70000" },
          "WHARF_PORT must be a port from 0 to 65535 (got 70000)",
        ],
        [["serve"], { WHARF_PORT: "80a" }, "WHARF_PORT must be a port from 0 to 65535 (got 80a)"],
        [["serve", "--port", "-1"], {}, "--port must be a port from 0 to 65535 (got -1)"],
        [["serve", "--port"], {}, "--port needs a port"],
        [
          ["serve"],
          { WHARF_BIND: "a b" },
          'WHARF_BIND must be an address such as 127.0.0.1 or :: (got "a b")',
        ],
        [["serve", "--bind="], {}, '--bind must be an address such as 127.0.0.1 or :: (got "")'],
        [["scrub", "--port", "8080"], {}, "--port is an option of serve only"],
      ];
      for (const [args, env, message] of cases) {
        const o = await inEmptyDir(dir, args, env).output();
        const stderr = wharfStderr(new TextDecoder().decode(o.stderr));
        assert.equal(o.code, 2, `${args.join(" ")}: ${stderr}`);
        assert.ok(stderr.startsWith(`wharf: ${message}`), `${args.join(" ")}: ${stderr}`);
      }
      // nothing was opened or written
      assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), []);
      // serve's help names both, with the order they win in
      const help = await inEmptyDir(dir, ["serve", "--help"]).output();
      assert.equal(help.code, 0);
      assert.match(
        new TextDecoder().decode(help.stdout),
        /--port N {12}listen on port N \(0: any free one\); else WHARF_PORT, else \[server\]\n {22}port, else 5000/,
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
