// commands/shutdown.ts: serve stops the same way on either listener. SIGTERM says so, stops
// accepting, lets open requests finish, then closes the stores and exits 0. The TLS listener
// also finishes a request still sending its body; Deno.serve (Deno 2.9.6) cuts such a request
// at shutdown, as it did before the stop path was shared, so the plain case checks the stop alone.
import assert from "node:assert/strict";
import { join } from "node:path";
import { serverTestOpts } from "../helpers/api.ts";
import { makePki } from "../helpers/certs.ts";
import { wharfCommand } from "../helpers/launch.ts";

const dec = new TextDecoder();

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

const STOPPING = /wharf stopping: finishing open requests and running jobs\n/;

async function stopsCleanly(tls: boolean): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "wharf-shutdown-" });
  let client: Deno.HttpClient | undefined;
  try {
    let tlsToml = "";
    if (tls) {
      const pki = await makePki(dir);
      tlsToml = `[server.tls]\nserver_certificate_bundle = ${JSON.stringify(pki.serverCert)}\n` +
        `server_private_key = ${JSON.stringify(pki.serverKey)}\nclient_auth = "none"\n`;
      client = Deno.createHttpClient({ caCerts: [await Deno.readTextFile(pki.caCert)] });
    }
    const config = join(dir, "wharf.toml");
    await Deno.writeTextFile(
      config,
      `[server]\nbind_address = "127.0.0.1"\nport = 0\n${tlsToml}` +
        `[blob_store.fs]\nroot_dir = ${JSON.stringify(join(dir, "blobs"))}\n` +
        `[metadata_store]\npath = ${JSON.stringify(join(dir, "m.kv"))}\n`,
    );
    const p = wharfCommand(["serve", "-c", config], {
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
      stdin: "null",
    }).spawn();
    const stderr = new Response(p.stderr).text();
    const reader = p.stdout.getReader();
    let out = await readUntil(reader, /wharf listening on https?:\/\/[^:]+:\d+/);
    const base = out.match(/wharf listening on (https?:\/\/[^:]+:\d+)/)![1]
      .replace("://localhost", "://127.0.0.1");
    const init = (i: RequestInit): RequestInit => ({ ...i, client } as RequestInit);
    const started = await fetch(`${base}/v2/shutdown/blobs/uploads/`, init({ method: "POST" }));
    await started.body?.cancel();
    assert.equal(started.status, 202);
    const location = new URL(started.headers.get("location")!, base).href;

    if (tls) {
      // An upload still sending its body when the stop comes.
      let send!: ReadableStreamDefaultController<Uint8Array>;
      const body = new ReadableStream<Uint8Array>({ start: (c) => void (send = c) });
      const patch = fetch(
        location,
        init({ method: "PATCH", body, headers: { "Content-Type": "application/octet-stream" } }),
      );
      send.enqueue(new Uint8Array(64 * 1024).fill(1));
      await new Promise((r) => setTimeout(r, 200));
      p.kill("SIGTERM");
      out = await readUntil(reader, STOPPING, out);
      send.enqueue(new Uint8Array(64 * 1024).fill(2));
      send.close();
      const res = await patch;
      await res.body?.cancel();
      assert.equal(res.status, 202, `${res.status}`);
      assert.equal(res.headers.get("range"), `0-${128 * 1024 - 1}`);
    } else {
      p.kill("SIGTERM");
      out = await readUntil(reader, STOPPING, out);
    }

    for (;;) {
      const r = await reader.read();
      if (r.done) break;
      out += dec.decode(r.value);
    }
    const st = await p.status;
    assert.equal(st.code, 0, out + (await stderr));
    assert.match(
      out,
      /\nwharf stopping: finishing open requests and running jobs\nwharf stopped\n$/,
    );
  } finally {
    client?.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test({
  ...serverTestOpts,
  name: "serve (plain HTTP): SIGTERM says so, closes the listener and the stores, status 0",
  fn: () => stopsCleanly(false),
});

Deno.test({
  ...serverTestOpts,
  name: "serve (TLS listener): SIGTERM drains an upload in progress, then stops with status 0",
  fn: () => stopsCleanly(true),
});
