// Upload sessions survive SIGKILL (DESIGN §Uploads: session state in KV, bytes in the blob
// store), and a push killed mid-body never becomes a visible blob.
import assert from "node:assert/strict";
import { concat } from "../helpers/bytes.ts";
import { pushBlob, sha256Hex, startServer, type TestServer } from "../helpers/server.ts";

const MiB = 1024 * 1024;

/** Deterministic, non-repeating-looking bytes so an offset mistake changes the digest. */
function bytes(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Runs `fn` with a server and the means to SIGKILL it and restart on the same data dir. */
async function withRestarts(
  fn: (ctx: { server: () => TestServer; restart: () => Promise<TestServer> }) => Promise<void>,
): Promise<void> {
  let s = await startServer();
  const dataDir = s.dataDir;
  try {
    await fn({
      server: () => s,
      restart: async () => {
        await s.kill();
        s = await startServer({ dataDir });
        return s;
      },
    });
  } finally {
    await s.stop();
    await Deno.remove(dataDir, { recursive: true }).catch(() => {});
  }
}

async function startUpload(s: TestServer, ns: string): Promise<string> {
  const r = await fetch(`${s.url}/v2/${ns}/blobs/uploads/`, { method: "POST" });
  await r.body?.cancel();
  assert.equal(r.status, 202);
  const loc = r.headers.get("location");
  assert.ok(loc, "Location on 202");
  // Location is relative: keep the path, the port changes on restart
  return new URL(loc, s.url).pathname;
}

async function status(s: TestServer, path: string): Promise<Response> {
  const r = await fetch(`${s.url}${path}`);
  await r.body?.cancel();
  return r;
}

async function patch(s: TestServer, path: string, start: number, chunk: Uint8Array) {
  const r = await fetch(`${s.url}${path}`, {
    method: "PATCH",
    body: chunk as BodyInit,
    headers: {
      "content-type": "application/octet-stream",
      "content-range": `${start}-${start + chunk.length - 1}`,
    },
  });
  await r.body?.cancel();
  return r;
}

async function complete(s: TestServer, path: string, digest: string): Promise<Response> {
  const r = await fetch(`${s.url}${path}?digest=${digest}`, { method: "PUT" });
  await r.body?.cancel();
  return r;
}

async function assertBlob(s: TestServer, ns: string, digest: string, want: Uint8Array) {
  const r = await fetch(`${s.url}/v2/${ns}/blobs/${digest}`);
  assert.equal(r.status, 200, `GET blob ${digest}`);
  assert.equal(r.headers.get("docker-content-digest"), digest);
  assert.equal(r.headers.get("content-length"), String(want.length));
  const body = new Uint8Array(await r.arrayBuffer());
  assert.equal(body.length, want.length);
  assert.equal(`sha256:${await sha256Hex(body)}`, digest);
}

async function assertBlobUnknown(s: TestServer, ns: string, digest: string) {
  const head = await fetch(`${s.url}/v2/${ns}/blobs/${digest}`, { method: "HEAD" });
  assert.equal(head.status, 404, "HEAD of the half-pushed blob");
  const r = await fetch(`${s.url}/v2/${ns}/blobs/${digest}`);
  assert.equal(r.status, 404, "GET of the half-pushed blob");
  assert.match(r.headers.get("content-type") ?? "", /json/);
  const body = await r.json() as { errors: { code: string }[] };
  assert.equal(body.errors[0].code, "BLOB_UNKNOWN");
}

Deno.test("a chunked upload resumes after SIGKILL and completes intact", async () => {
  await withRestarts(async ({ server, restart }) => {
    const ns = "restart/chunked";
    const first = bytes(3 * MiB, 1);
    const second = bytes(MiB + 123, 2);
    const all = concat(first, second);
    const digest = `sha256:${await sha256Hex(all)}`;

    const path = await startUpload(server(), ns);
    const uuid = path.split("/").pop()!;
    const p1 = await patch(server(), path, 0, first);
    assert.equal(p1.status, 202);
    assert.equal(p1.headers.get("range"), `0-${first.length - 1}`);

    const s = await restart();
    const st = await status(s, path);
    assert.equal(st.status, 204, "upload status after restart");
    assert.equal(st.headers.get("range"), `0-${first.length - 1}`);
    assert.equal(st.headers.get("docker-upload-uuid"), uuid);

    const p2 = await patch(s, path, first.length, second);
    assert.equal(p2.status, 202);
    assert.equal(p2.headers.get("range"), `0-${all.length - 1}`);

    const done = await complete(s, path, digest);
    assert.equal(done.status, 201);
    assert.equal(done.headers.get("docker-content-digest"), digest);
    assert.equal(done.headers.get("location"), `/v2/${ns}/blobs/${digest}`);
    await assertBlob(s, ns, digest, all);
  });
});

Deno.test("a session started before SIGKILL with nothing committed resumes from zero", async () => {
  await withRestarts(async ({ server, restart }) => {
    const ns = "restart/empty";
    const data = bytes(2 * MiB, 3);
    const digest = `sha256:${await sha256Hex(data)}`;

    const path = await startUpload(server(), ns);
    const s = await restart();
    const st = await status(s, path);
    assert.equal(st.status, 204, "upload status after restart");
    assert.equal(st.headers.get("range"), "0-0");
    assert.equal(st.headers.get("docker-upload-uuid"), path.split("/").pop());

    const p = await patch(s, path, 0, data);
    assert.equal(p.status, 202);
    assert.equal(p.headers.get("range"), `0-${data.length - 1}`);
    const done = await complete(s, path, digest);
    assert.equal(done.status, 201);
    assert.equal(done.headers.get("docker-content-digest"), digest);
    await assertBlob(s, ns, digest, data);
  });
});

Deno.test("a monolithic push killed mid-body leaves no blob", async () => {
  await withRestarts(async ({ server, restart }) => {
    const ns = "restart/monolithic";
    const data = bytes(8 * MiB, 4);
    const digest = `sha256:${await sha256Hex(data)}`;

    // Content-Length declared, so the POST itself would complete the blob (SPEC §Blob upload);
    // raw TCP because the body must stop a third of the way in.
    const s0 = server();
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: s0.port });
    try {
      const head = `POST /v2/${ns}/blobs/uploads/?digest=${digest} HTTP/1.1\r\n` +
        `Host: 127.0.0.1:${s0.port}\r\nContent-Type: application/octet-stream\r\n` +
        `Content-Length: ${data.length}\r\n\r\n`;
      const part = concat(new TextEncoder().encode(head), data.subarray(0, 3 * MiB));
      for (let o = 0; o < part.length;) o += await conn.write(part.subarray(o));
      await sleep(300); // let the server hash and write what arrived
      await restart();
    } finally {
      conn.close();
    }
    const s = server();
    await assertBlobUnknown(s, ns, digest);
    // the registry still takes the whole blob afterwards
    assert.equal(await pushBlob(s.url, ns, data), digest);
    await assertBlob(s, ns, digest, data);
  });
});

Deno.test("a streamed push killed mid-body leaves no blob", async () => {
  await withRestarts(async ({ server, restart }) => {
    const ns = "restart/streamed";
    const data = bytes(4 * MiB, 5);
    const digest = `sha256:${await sha256Hex(data)}`;
    const chunk = 64 * 1024;
    let sent = 0;
    let stopped = false;
    let settled = false;
    // slow producer: 64 KiB every 10 ms, so the kill lands long before the end
    const body = new ReadableStream<Uint8Array>({
      async pull(c) {
        await sleep(10);
        if (stopped) return;
        if (sent >= data.length) return c.close();
        c.enqueue(data.slice(sent, sent + chunk));
        sent += chunk;
      },
      cancel() {
        stopped = true;
      },
    });
    const push = fetch(`${server().url}/v2/${ns}/blobs/uploads/?digest=${digest}`, {
      method: "POST",
      body,
      headers: { "content-type": "application/octet-stream" },
    }).then(async (r) => {
      await r.body?.cancel();
      return r.status;
    }, (e: Error) => e).finally(() => settled = true);
    while (sent < MiB && !settled) await sleep(10);
    await restart();
    const outcome = await push;
    stopped = true;
    await sleep(20); // the last pull's timer
    assert.ok(
      outcome instanceof Error || outcome === 202,
      `push must not complete, got ${outcome}`,
    );
    assert.ok(sent < data.length, "the body was cut short");
    await assertBlobUnknown(server(), ns, digest);
  });
});
