import assert from "node:assert/strict";
import { join } from "node:path";
import { makePki } from "../../tests/helpers/certs.ts";
import { PostClient, PostError } from "./http_post.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();
const latin1 = new TextDecoder("latin1");

interface Seen {
  head: string;
  body: string;
  connection: number;
}

/**
 * A receiver written on raw TCP, so each test chooses exactly what goes on the wire: `answer`
 * returns the bytes to send for a request (null: send nothing, keep the connection open;
 * "close": close without answering), and whether to close the connection after them.
 */
function rawReceiver(
  answer: (req: Seen, n: number) => { bytes: string | null; close?: boolean },
) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const seen: Seen[] = [];
  const conns: Deno.Conn[] = [];
  let accepted = 0;
  const serve = async (conn: Deno.Conn, connection: number) => {
    const buf = new Uint8Array(1 << 20);
    let have = 0;
    try {
      for (;;) {
        // latin1: one character per byte, so the indexes below are byte offsets.
        const text = latin1.decode(buf.subarray(0, have));
        const end = text.indexOf("\r\n\r\n");
        const len = Number(/content-length: (\d+)/i.exec(text)?.[1] ?? NaN);
        if (end < 0 || have < end + 4 + len) {
          const n = await conn.read(buf.subarray(have));
          if (n === null) return conn.close();
          have += n;
          continue;
        }
        const body = dec.decode(buf.subarray(end + 4, end + 4 + len));
        seen.push({ head: text.slice(0, end), body, connection });
        buf.copyWithin(0, end + 4 + len, have);
        have -= end + 4 + len;
        const req = seen[seen.length - 1];
        const a = answer(req, seen.length);
        if (a.bytes !== null) await conn.write(enc.encode(a.bytes));
        if (a.close) return conn.close();
      }
    } catch { /* closed by the test */ }
  };
  const loop = (async () => {
    try {
      for await (const conn of listener) {
        conns.push(conn);
        serve(conn, ++accepted);
      }
    } catch { /* closed */ }
  })();
  const port = (listener.addr as Deno.NetAddr).port;
  return {
    url: `http://127.0.0.1:${port}/hook?x=1`,
    seen,
    accepted: () => accepted,
    async stop() {
      listener.close();
      for (const c of conns) {
        try {
          c.close();
        } catch { /* done */ }
      }
      await loop;
    },
  };
}

const NO_CONTENT = { bytes: "HTTP/1.1 204 No Content\r\n\r\n" };

Deno.test("http_post: one kept-alive connection carries sequential POSTs, bytes as sent", async () => {
  const rx = rawReceiver(() => NO_CONTENT);
  const c = new PostClient();
  try {
    for (let i = 0; i < 20; i++) {
      const status = await c.post(rx.url, { "X-Svc-Event-Id": `e${i}` }, `{"i":${i},"é":1}`, 2000);
      assert.equal(status, 204);
    }
    assert.equal(rx.accepted(), 1, "one connection for all");
    assert.equal(rx.seen.length, 20);
    const first = rx.seen[0];
    assert.match(first.head, /^POST \/hook\?x=1 HTTP\/1\.1\r\n/);
    assert.match(first.head, /\r\nHost: 127\.0\.0\.1:\d+\r\n/);
    assert.match(first.head, /\r\nX-Svc-Event-Id: e0\r\n/);
    // The length counts bytes, not characters.
    assert.match(first.head, /\r\nContent-Length: 14$/);
    assert.equal(first.body, '{"i":0,"é":1}');
  } finally {
    c.close();
    await rx.stop();
  }
});

Deno.test("http_post: concurrent POSTs each get a connection, and the pool reuses them", async () => {
  const rx = rawReceiver(() => ({ bytes: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" }));
  const c = new PostClient();
  try {
    for (let round = 0; round < 3; round++) {
      const got = await Promise.all(
        Array.from({ length: 4 }, (_, i) => c.post(rx.url, {}, `${round}-${i}`, 2000)),
      );
      assert.deepEqual(got, [200, 200, 200, 200]);
    }
    assert.equal(rx.seen.length, 12);
    assert.equal(rx.accepted(), 4, "the first round's four connections carry the later rounds");
  } finally {
    c.close();
    await rx.stop();
  }
});

Deno.test("http_post: Connection: close, chunked, unsized or partly sent bodies are not reused", async () => {
  const answers = [
    { bytes: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n" },
    { bytes: "HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n" },
    { bytes: "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n" },
    { bytes: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc" }, // the rest never comes
    { bytes: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nok" },
    NO_CONTENT,
  ];
  const rx = rawReceiver((_, n) => answers[n - 1] ?? NO_CONTENT);
  const c = new PostClient();
  try {
    const got = [];
    for (let i = 0; i < answers.length; i++) got.push(await c.post(rx.url, {}, "{}", 2000));
    assert.deepEqual(got, [200, 202, 200, 200, 200, 204]);
    assert.deepEqual(
      rx.seen.map((s) => s.connection),
      [1, 2, 3, 4, 5, 6],
      "each answer that does not end cleanly costs its connection",
    );
  } finally {
    c.close();
    await rx.stop();
  }
});

Deno.test("http_post: a pooled connection closed by the receiver is retried on a fresh one", async () => {
  // The receiver answers, keeps the connection, then drops it while idle (as a keep-alive
  // timeout does): the next POST meets the dead connection first.
  const rx = rawReceiver((_, n) => n === 1 ? { ...NO_CONTENT, close: true } : NO_CONTENT);
  const c = new PostClient();
  try {
    assert.equal(await c.post(rx.url, {}, "a", 2000), 204);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(await c.post(rx.url, {}, "b", 2000), 204);
    assert.deepEqual(rx.seen.map((s) => [s.body, s.connection]), [["a", 1], ["b", 2]]);
  } finally {
    c.close();
    await rx.stop();
  }
});

Deno.test("http_post: interim 1xx answers are skipped", async () => {
  const rx = rawReceiver(() => ({
    bytes: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" +
      "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
  }));
  const c = new PostClient();
  try {
    assert.equal(await c.post(rx.url, {}, "{}", 2000), 201);
    assert.equal(await c.post(rx.url, {}, "{}", 2000), 201);
    assert.equal(rx.accepted(), 1);
  } finally {
    c.close();
    await rx.stop();
  }
});

Deno.test("http_post: non-2xx statuses are returned as they are", async () => {
  const statuses = [500, 404, 302, 429];
  const rx = rawReceiver((_, n) => ({
    bytes: `HTTP/1.1 ${statuses[n - 1]} X\r\nContent-Length: 0\r\n\r\n`,
  }));
  const c = new PostClient();
  try {
    const got = [];
    for (let i = 0; i < statuses.length; i++) got.push(await c.post(rx.url, {}, "{}", 2000));
    assert.deepEqual(got, statuses);
  } finally {
    c.close();
    await rx.stop();
  }
});

Deno.test("http_post: silence, garbage, a huge head and a closed port end in a PostError", async () => {
  const c = new PostClient();
  const silent = rawReceiver(() => ({ bytes: null }));
  try {
    const t0 = performance.now();
    await assert.rejects(
      c.post(silent.url, {}, "{}", 300),
      (e) => e instanceof PostError && e.timedOut && /no answer within 300 ms/.test(e.message),
    );
    const took = performance.now() - t0;
    assert.ok(took >= 290 && took < 3000, `timed out after ${took} ms`);
  } finally {
    await silent.stop();
  }
  const cases: [string, RegExp][] = [
    ["SSH-2.0-OpenSSH_9\r\n\r\n", /malformed answer/],
    ["HTTP/1.1 2000 OK\r\n\r\n", /malformed answer/],
    ["HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", /malformed answer header/],
    [`HTTP/1.1 200 OK\r\nX: ${"a".repeat(70_000)}\r\n\r\n`, /head over 64 KiB/],
    ["HTTP/1.1 200 O", /closed mid-answer/],
    ["", /closed without an answer/],
  ];
  for (const [bytes, want] of cases) {
    const rx = rawReceiver(() => ({ bytes, close: true }));
    try {
      await assert.rejects(
        c.post(rx.url, {}, "{}", 2000),
        (e) => e instanceof PostError && !e.timedOut && want.test(e.message),
        JSON.stringify(bytes.slice(0, 40)),
      );
    } finally {
      await rx.stop();
    }
  }
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (l.addr as Deno.NetAddr).port;
  l.close();
  await assert.rejects(
    c.post(`http://127.0.0.1:${port}/`, {}, "{}", 2000),
    (e) => e instanceof PostError && !e.timedOut && /refused/i.test(e.message),
  );
  await assert.rejects(
    c.post("http://127.0.0.1:1/", { "X-Bad": "a\r\nInjected: 1" }, "{}", 2000),
    (e) => e instanceof PostError && /bad header/.test(e.message),
  );
  c.close();
});

Deno.test("http_post: https with the receiver's CA, and a clear error without it", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wharf-http-post-" });
  const pki = await makePki(dir);
  let n = 0;
  const server = Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    cert: await Deno.readTextFile(pki.serverCert),
    key: await Deno.readTextFile(pki.serverKey),
    onListen: () => {},
  }, async (req) => {
    assert.equal(req.method, "POST");
    assert.equal(await req.text(), `{"n":${n}}`);
    n++;
    return new Response("fine", { status: 200 });
  });
  const url = `https://localhost:${(server.addr as Deno.NetAddr).port}/in`;
  const trusted = new PostClient({ caCerts: [await Deno.readTextFile(pki.caCert)] });
  const untrusted = new PostClient();
  try {
    assert.equal(await trusted.post(url, {}, `{"n":0}`, 5000), 200);
    assert.equal(await trusted.post(url, {}, `{"n":1}`, 5000), 200);
    await assert.rejects(
      untrusted.post(url, {}, "{}", 5000),
      (e) => e instanceof PostError && !e.timedOut && /certificate|UnknownIssuer/i.test(e.message),
    );
    assert.equal(n, 2);
  } finally {
    trusted.close();
    untrusted.close();
    await server.shutdown();
    await Deno.remove(join(dir), { recursive: true });
  }
});
