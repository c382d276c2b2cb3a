// [metadata_store] url: Wharf opens a remote KV over KV Connect with DENO_KV_ACCESS_TOKEN. No
// KV Connect server (denokv) is installable here (npm's @deno/kv is a client only), so this
// checks the wiring against a stand-in endpoint: the serve process starts the KV Connect
// metadata exchange at that URL with the token, and does not fall back to a local file.
import assert from "node:assert/strict";
import { join } from "node:path";
import { serverTestOpts } from "../helpers/api.ts";
import { wharfCommand } from "../helpers/launch.ts";

Deno.test({
  name: "remote KV: [metadata_store] url opens KV Connect at that URL with DENO_KV_ACCESS_TOKEN",
  ...serverTestOpts,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "wharf-remote-kv-" });
    const seen: { method: string; path: string; auth: string | null; body: string }[] = [];
    let got: () => void;
    const first = new Promise<void>((r) => (got = r));
    const kvc = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (req) => {
      seen.push({
        method: req.method,
        path: new URL(req.url).pathname,
        auth: req.headers.get("authorization"),
        body: await req.text(),
      });
      got();
      return new Response("not a KV Connect server", { status: 404 });
    });
    const url = `http://127.0.0.1:${kvc.addr.port}/databases/wharf/connect`;
    await Deno.writeTextFile(
      join(dir, "wharf.toml"),
      `[server]\nbind_address = "127.0.0.1"\nport = 0\n[blob_store.fs]\nroot_dir = "${dir}/blobs"\n[metadata_store]\nurl = "${url}"\n`,
    );
    const child = wharfCommand(["serve", "-c", join(dir, "wharf.toml")], {
      env: { DENO_KV_ACCESS_TOKEN: "kv-token-for-test-1234", NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const out = child.output();
    try {
      await Promise.race([
        first,
        new Promise((_, rej) => setTimeout(() => rej(new Error("no KV Connect request")), 30_000)),
      ]);
      assert.equal(seen[0].method, "POST");
      assert.equal(seen[0].path, "/databases/wharf/connect");
      assert.equal(seen[0].auth, "Bearer kv-token-for-test-1234");
      assert.match(seen[0].body, /supportedVersions/);
      // No local KV file was created instead.
      for await (const e of Deno.readDir(dir)) assert.ok(!e.name.endsWith(".kv"), e.name);
    } finally {
      try {
        child.kill("SIGKILL");
      } catch { /* exited */ }
      await out;
      await kvc.shutdown();
      await Deno.remove(dir, { recursive: true });
    }
  },
});
