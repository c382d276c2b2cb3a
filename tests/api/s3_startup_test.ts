// Issue 35 item 5: an S3 endpoint that cannot be reached at startup ends the server with exit
// code 2 and one line naming the endpoint and the setting (`[blob_store.s3] endpoint`), as a
// config error does, not with a stack trace.
import assert from "node:assert/strict";
import { join } from "node:path";
import { s3Toml, startServer } from "../helpers/server.ts";
import { wharfCommand, wharfStderr } from "../helpers/launch.ts";

/** A loopback port nothing listens on: bound, then closed. */
function closedPort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  return port;
}

Deno.test("serve: an unreachable [blob_store.s3] endpoint is one line and exit code 2", async () => {
  const endpoint = `http://127.0.0.1:${closedPort()}`;
  let message = "";
  try {
    const s = await startServer({ blobStore: s3Toml(endpoint, "t/unreachable") });
    await s.stop();
  } catch (e) {
    message = (e as Error).message;
  }
  const m = /^server exited \((\d+)\) before listening:\n([\s\S]*)$/.exec(message);
  assert.ok(m, `the server should have refused to start: ${message || "it started"}`);
  const [, code, output] = m;
  assert.equal(code, "2", output);
  const lines = output.split("\n").filter((l) => l.startsWith("wharf:"));
  assert.equal(lines.length, 1, output);
  assert.match(
    lines[0],
    new RegExp(
      `^wharf: config \\S+: \\[blob_store\\.s3\\] endpoint = "${endpoint}": cannot reach S3 \\(.*refused`,
      "i",
    ),
  );
  assert.doesNotMatch(output, /^\s+at /m, "no stack trace");
  assert.doesNotMatch(output, /Uncaught|^error:/m, "no uncaught error");
});

Deno.test("one-shot commands: an unreachable [blob_store.s3] endpoint is one line, exit 2", async () => {
  const endpoint = `http://127.0.0.1:${closedPort()}`;
  const dir = await Deno.makeTempDir({ prefix: "wharf-s3-cmd-" });
  try {
    const config = join(dir, "wharf.toml");
    await Deno.writeTextFile(
      config,
      `${s3Toml(endpoint, "t/unreachable")}\n[metadata_store]\npath = "${dir}/m.kv"\n`,
    );
    for (const command of ["scrub", "reindex", "scan", "replicate"]) {
      const o = await wharfCommand([command, "--dry-run", "-c", config], {
        env: { RUST_BACKTRACE: "0", NO_COLOR: "1" },
      }).output();
      const err = wharfStderr(new TextDecoder().decode(o.stderr));
      assert.equal(o.code, 2, `${command}: ${err}`);
      const lines = err.split("\n").filter((l) => l.startsWith("wharf:"));
      assert.equal(lines.length, 1, `${command}: ${err}`);
      assert.doesNotMatch(err, /^\s+at |Uncaught|^error:/m, `${command}: no stack trace`);
      assert.match(lines[0], /^wharf: config \S+: \[blob_store\.s3\] endpoint = .*cannot reach S3/);
    }
  } finally {
    await Deno.remove(dir, { recursive: true }).catch(() => {});
  }
});
